package cutproxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every connection with what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readFull reads len(want) bytes from c within d and wants them equal.
func readFull(t *testing.T, c net.Conn, want []byte, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes that differ from the %d written", len(got), len(want))
	}
}

// SetDelay adds its delay each way, to a round trip, and keeps the order
// of chunks written one after another without slowing them to one per
// delay.
func TestDelay(t *testing.T) {
	p := Start(t, echoServer(t))
	const d = 50 * time.Millisecond
	p.SetDelay(d)
	c := dial(t, p)
	start := time.Now()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	readFull(t, c, []byte("ping"), 5*time.Second)
	if rtt := time.Since(start); rtt < 2*d || rtt > 2*d+time.Second {
		t.Fatalf("round trip %v with a delay of %v each way", rtt, d)
	}
	// 50 chunks in a row: in order, and in far less than 50 delays.
	var all []byte
	for i := range 50 {
		b := bytes.Repeat([]byte{byte('a' + i%26)}, 1000+i)
		all = append(all, b...)
	}
	start = time.Now()
	go func() {
		for off := 0; off < len(all); {
			n := min(1000, len(all)-off)
			if _, err := c.Write(all[off : off+n]); err != nil {
				return
			}
			off += n
			time.Sleep(time.Millisecond)
		}
	}()
	readFull(t, c, all, 10*time.Second)
	if took := time.Since(start); took > 25*d {
		t.Fatalf("%d bytes in chunks took %v through a delay of %v: the delay throttles", len(all), took, d)
	}
	p.SetDelay(0)
	start = time.Now()
	_, _ = c.Write([]byte("fast"))
	readFull(t, c, []byte("fast"), 5*time.Second)
	if rtt := time.Since(start); rtt >= d {
		t.Fatalf("round trip %v after SetDelay(0)", rtt)
	}
}

// Pause holds what is sent, on open and on new connections, and Resume
// forwards it whole; Cut ends connections held by a pause.
func TestPause(t *testing.T) {
	p := Start(t, echoServer(t))
	c := dial(t, p)
	_, _ = c.Write([]byte("before"))
	readFull(t, c, []byte("before"), 5*time.Second)

	p.Pause()
	_, _ = c.Write([]byte("held"))
	c2 := dial(t, p) // accepted while paused
	_, _ = c2.Write([]byte("new"))
	one := make([]byte, 1)
	for _, conn := range []net.Conn{c, c2} {
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, err := conn.Read(one); n != 0 || err == nil {
			t.Fatalf("%d bytes came through a pause (%v)", n, err)
		}
	}
	p.Resume()
	readFull(t, c, []byte("held"), 5*time.Second)
	readFull(t, c2, []byte("new"), 5*time.Second)

	p.Pause()
	_, _ = c.Write([]byte("lost"))
	// Nothing outside the proxy marks the bytes' arrival, so this pause is
	// the window for the pipe to take them and wait on the pause (a Cut
	// that comes first closes the connection all the same).
	time.Sleep(50 * time.Millisecond)
	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(one); err == nil {
		t.Fatal("a connection held by a pause is still open after Cut")
	}
	p.mu.Lock()
	n := len(p.conns)
	p.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d connections left after Cut", n)
	}
	p.Resume()
}
