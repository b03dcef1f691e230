// The official npm SDKs, unmodified, streaming a tool loop through the
// gateway's translation: openai's chat.completions.stream and
// responses.stream, and @anthropic-ai/sdk's messages.stream, each against
// models served by lines of other protocols. The prompt scripts the
// simulated provider's tool calls (sim:call lines); the call the SDK
// assembles must have the scripted name and arguments and a stable id,
// and goes back with its result on a second turn, which must end the loop
// with the provider's usual reply.
//
//   node clients/sdk-stream.mjs <gateway base URL> <API key>
//
// The key's route must serve every text model on every text endpoint
// (relay demo's "standard key"). Exits 0 when every case passes, else 1
// with what differed. cmd/relay's TestNodeSDKs runs it against relay demo.

import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const [base, key] = process.argv.slice(2);
if (!base || !key) {
  console.error("usage: node sdk-stream.mjs <gateway base URL> <API key>");
  process.exit(2);
}

// The scripted calls: nested objects, arrays, numbers, escapes and
// non-ASCII text, so a codec that cuts or re-encodes streamed arguments
// wrongly shows.
const SCRIPT = [
  { name: "get_weather", args: { city: "Zürich", days: 3, units: { temp: "C", wind: "km/h" }, note: 'say "hi" ☀ \\ done' } },
  { name: "get_time", args: { zone: "Europe/Zurich", formats: ["iso", "unix"], h24: true, offset: -1.5, extra: null } },
];

const SCHEMAS = {
  get_weather: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" }, units: { type: "object" }, note: { type: "string" } } },
  get_time: { type: "object", properties: { zone: { type: "string" }, formats: { type: "array", items: { type: "string" } }, h24: { type: "boolean" }, offset: { type: "number" } } },
};

// prompt scripts the first call, or both at once.
function prompt(parallel) {
  const want = parallel ? SCRIPT : SCRIPT.slice(0, 1);
  const lines = ["Check the weather for me.", ...want.map((c) => `sim:call ${c.name} ${JSON.stringify(c.args)}`)];
  if (parallel) lines.push("sim:calls-parallel");
  return { text: lines.join("\n"), want };
}

// checkCalls wants the scripted calls in order (arguments equal as JSON),
// every id present and distinct, every index distinct.
function checkCalls(got, want) {
  assert.equal(got.length, want.length, `${got.length} tool calls ${JSON.stringify(got)}, want ${want.length}`);
  const ids = new Set();
  const idx = new Set();
  got.forEach((g, i) => {
    assert.equal(g.name, want[i].name, `call ${i}: name`);
    let args;
    try {
      args = typeof g.args === "string" ? JSON.parse(g.args) : g.args;
    } catch (e) {
      assert.fail(`call ${i}: arguments are not JSON: ${g.args}`);
    }
    assert.deepStrictEqual(args, want[i].args, `call ${i}: arguments ${JSON.stringify(args)}, want ${JSON.stringify(want[i].args)}`);
    assert.ok(g.id && !ids.has(g.id), `call ${i}: id ${JSON.stringify(g.id)} missing or repeated`);
    assert.ok(!idx.has(g.index), `call ${i}: index ${g.index} repeated`);
    ids.add(g.id);
    idx.add(g.index);
  });
}

const output = (c) => JSON.stringify({ ok: true, tool: c.name });

function checkFinal(model, text) {
  assert.ok(text.startsWith("Simulated reply from") && text.includes(model), `final turn: ${JSON.stringify(text)}, want the sim's reply from ${model}`);
}

const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });

// ---- chat.completions.stream ----

const chatTools = SCRIPT.map((c) => ({ type: "function", function: { name: c.name, description: `Look up ${c.name}`, parameters: SCHEMAS[c.name] } }));

async function chatTurn(params) {
  const stream = openai.chat.completions.stream(params);
  const ids = new Map(); // tool call index → the id it first came with
  stream.on("chunk", (chunk) => {
    for (const ch of chunk.choices ?? []) {
      for (const d of ch.delta?.tool_calls ?? []) {
        if (!d.id) {
          assert.ok(ids.has(d.index), `tool call ${d.index} starts without an id`);
        } else {
          assert.ok(!ids.has(d.index) || ids.get(d.index) === d.id, `tool call ${d.index}: id ${ids.get(d.index)}, then ${d.id}`);
          ids.set(d.index, d.id);
        }
      }
    }
  });
  const done = await stream.finalChatCompletion();
  const ch = done.choices[0];
  const calls = (ch.message.tool_calls ?? []).map((tc) => {
    const index = [...ids].find(([, id]) => id === tc.id)?.[0];
    assert.notEqual(index, undefined, `tool call ${tc.id} was never streamed`);
    return { id: tc.id, name: tc.function.name, args: tc.function.arguments, index };
  });
  return { message: ch.message, finish: ch.finish_reason, calls };
}

async function chatLoop(model, parallel) {
  const { text, want } = prompt(parallel);
  const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: text }];
  const params = { model, messages, tools: chatTools, max_tokens: 256 };
  const first = await chatTurn(params);
  assert.equal(first.finish, "tool_calls", "finish_reason");
  checkCalls(first.calls, want);
  const { role, content, tool_calls } = first.message;
  params.messages = [...messages, { role, content, tool_calls }, ...first.calls.map((c) => ({ role: "tool", tool_call_id: c.id, content: output(c) }))];
  const second = await chatTurn(params);
  assert.equal(second.finish, "stop", "second turn's finish_reason");
  assert.equal(second.calls.length, 0, "second turn's tool calls");
  checkFinal(model, second.message.content ?? "");
}

// ---- responses.stream ----

const respTools = SCRIPT.map((c) => ({ type: "function", name: c.name, description: `Look up ${c.name}`, parameters: SCHEMAS[c.name], strict: false }));

async function respTurn(params) {
  const stream = openai.responses.stream(params);
  const added = new Map(); // item id → {call_id, name, output_index}
  const deltas = new Map();
  stream.on("event", (ev) => {
    if (ev.type === "response.output_item.added" && ev.item.type === "function_call") {
      assert.ok(ev.item.id && ev.item.call_id && !added.has(ev.item.id), `function_call added as ${JSON.stringify(ev.item)}`);
      added.set(ev.item.id, { call_id: ev.item.call_id, name: ev.item.name, index: ev.output_index });
      deltas.set(ev.item.id, "");
    } else if (ev.type === "response.function_call_arguments.delta") {
      assert.ok(deltas.has(ev.item_id), `arguments for item ${ev.item_id} before it was added`);
      deltas.set(ev.item_id, deltas.get(ev.item_id) + ev.delta);
    } else if (ev.type === "response.output_item.done" && ev.item.type === "function_call") {
      const a = added.get(ev.item.id);
      assert.ok(a && a.call_id === ev.item.call_id && a.name === ev.item.name && a.index === ev.output_index, `item ${ev.item.id} done as ${JSON.stringify(ev.item)}, added as ${JSON.stringify(a)}`);
      assert.equal(ev.item.arguments, deltas.get(ev.item.id), `item ${ev.item.id}: arguments done vs deltas`);
    }
  });
  const res = await stream.finalResponse();
  assert.equal(res.status, "completed", "response status");
  const calls = [];
  res.output.forEach((it, i) => {
    if (it.type !== "function_call") return;
    const a = added.get(it.id);
    assert.ok(a && a.call_id === it.call_id && a.index === i, `completed call ${it.id} (${it.call_id} at ${i}) is not the one streamed: ${JSON.stringify(a)}`);
    calls.push({ id: it.call_id, name: it.name, args: it.arguments, index: i });
  });
  assert.equal(calls.length, added.size, "calls streamed vs in the final response");
  return { res, calls };
}

async function respLoop(model, parallel) {
  const { text, want } = prompt(parallel);
  const input = [{ role: "user", content: text }];
  const params = { model, instructions: "Be brief.", input, tools: respTools, max_output_tokens: 256 };
  const first = await respTurn(params);
  checkCalls(first.calls, want);
  const back = first.res.output.map((it) => {
    const { parsed_arguments, ...rest } = it; // the SDK's own addition
    if (rest.type === "message") rest.content = rest.content.map(({ parsed, ...c }) => c);
    return rest;
  });
  params.input = [...input, ...back, ...first.calls.map((c) => ({ type: "function_call_output", call_id: c.id, output: output(c) }))];
  const second = await respTurn(params);
  assert.equal(second.calls.length, 0, "second turn's tool calls");
  checkFinal(model, second.res.output_text ?? "");
}

// ---- messages.stream ----

const msgTools = SCRIPT.map((c) => ({ name: c.name, description: `Look up ${c.name}`, input_schema: SCHEMAS[c.name] }));

async function msgTurn(params) {
  const stream = anthropic.messages.stream(params);
  const started = new Map(); // block index → its content_block_start block
  const partial = new Map();
  stream.on("streamEvent", (ev) => {
    if (ev.type === "content_block_start") {
      started.set(ev.index, ev.content_block);
      partial.set(ev.index, "");
    } else if (ev.type === "content_block_delta" && ev.delta.type === "input_json_delta") {
      partial.set(ev.index, partial.get(ev.index) + ev.delta.partial_json);
    }
  });
  const msg = await stream.finalMessage();
  const calls = [];
  msg.content.forEach((b, i) => {
    if (b.type !== "tool_use") return;
    const st = started.get(i);
    assert.ok(st && st.type === "tool_use" && st.id === b.id && st.name === b.name, `block ${i} started as ${JSON.stringify(st)}, final ${JSON.stringify(b)}`);
    assert.deepStrictEqual(JSON.parse(partial.get(i) || "{}"), b.input, `block ${i}: input ${JSON.stringify(b.input)}, its input_json_deltas ${partial.get(i)}`);
    calls.push({ id: b.id, name: b.name, args: b.input, index: i });
  });
  return { msg, calls };
}

async function msgLoop(model, parallel) {
  const { text, want } = prompt(parallel);
  const messages = [{ role: "user", content: text }];
  const params = { model, max_tokens: 1024, system: "Be brief.", messages, tools: msgTools };
  const first = await msgTurn(params);
  assert.equal(first.msg.stop_reason, "tool_use", "stop_reason");
  checkCalls(first.calls, want);
  params.messages = [
    ...messages,
    { role: "assistant", content: first.msg.content },
    { role: "user", content: first.calls.map((c) => ({ type: "tool_result", tool_use_id: c.id, content: output(c) })) },
  ];
  const second = await msgTurn(params);
  assert.equal(second.msg.stop_reason, "end_turn", "second turn's stop_reason");
  assert.equal(second.calls.length, 0, "second turn's tool calls");
  checkFinal(model, second.msg.content.filter((b) => b.type === "text").map((b) => b.text).join(""));
}

const cases = [
  ["chat.completions.stream", chatLoop, ["modela-opus-5-5", "modelf-flash"]],
  ["responses.stream", respLoop, ["modele-k3", "modela-opus-5-5", "modelf-flash"]],
  ["messages.stream", msgLoop, ["modele-k3", "modelf-flash", "modelb-6-astra"]],
];

let failed = 0;
for (const [api, loop, models] of cases) {
  for (const model of models) {
    for (const parallel of [false, true]) {
      const name = `${api} ${model} ${parallel ? "parallel" : "one"}`;
      try {
        await loop(model, parallel);
        console.log(`ok   ${name}`);
      } catch (e) {
        failed++;
        const detail = e.status ? `${e.status} ${JSON.stringify(e.error ?? e.message)}` : e.message;
        console.log(`FAIL ${name}: ${detail}`);
      }
    }
  }
}
if (failed > 0) {
  console.log(`${failed} case(s) failed`);
  process.exit(1);
}
console.log("all cases passed");
