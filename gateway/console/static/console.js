// The copy buttons: shown only when scripts run; each copies the text of
// the element its data-copy names.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button[data-copy]").forEach(function (btn) {
    var target = document.getElementById(btn.getAttribute("data-copy"));
    if (!target) { return; }
    btn.hidden = false;
    btn.addEventListener("click", function () {
      var status = document.getElementById("copy-status");
      var text = target.textContent;
      var done = function (msg) { if (status) { status.textContent = msg; } };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(function () { done("Copied."); }, function () { select(target); done("Press Ctrl+C to copy."); });
      } else {
        select(target);
        done("Press Ctrl+C to copy.");
      }
    });
  });
  function select(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
});
