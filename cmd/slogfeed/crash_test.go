package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
)

// TestCrashDuringIngest kills `slogfeed serve` with SIGKILL twenty times
// while readings are being posted, restarts it each time, and checks that
// every reading the API acknowledged (201) survived and that the bbolt file
// passes its consistency check after every kill.
func TestCrashDuringIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it twenty times")
	}
	bin := filepath.Join(t.TempDir(), "slogfeed")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build: %v", err)
	}
	data := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 11))
	type ack struct{ sensor, id string }
	var acked []ack
	for round := 0; round < 20; round++ {
		addr := freeAddr(t)
		cmd := exec.Command(bin, "--log-level", "warn", "serve", "--addr", addr, "--data", data)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Ready once it says where it serves.
		ready := make(chan error, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "serving on") {
					ready <- nil
					_, _ = io.Copy(io.Discard, stderr)
					return
				}
			}
			ready <- fmt.Errorf("slogfeed exited before serving: %v", sc.Err())
		}()
		select {
		case err := <-ready:
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("round %d: not serving after a minute", round)
		}

		// Post from four goroutines; kill after a random number of acks.
		killAt := 20 + rng.IntN(200)
		var mu sync.Mutex
		var wg sync.WaitGroup
		n := 0
		ctx, cancel := context.WithCancel(context.Background())
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sensor := fmt.Sprintf("s%d", g)
				for i := 0; ctx.Err() == nil; i++ {
					body, _ := json.Marshal(map[string]any{"value": float64(round*1000 + i), "unit": "C"})
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/v1/sensors/"+sensor+"/readings", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						return // killed
					}
					var out struct {
						ID string `json:"id"`
					}
					ok := resp.StatusCode == http.StatusCreated && json.NewDecoder(resp.Body).Decode(&out) == nil && out.ID != ""
					resp.Body.Close()
					if !ok {
						continue
					}
					mu.Lock()
					acked = append(acked, ack{sensor, out.ID})
					n++
					if n == killAt {
						_ = cmd.Process.Signal(syscall.SIGKILL)
						cancel()
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		cancel()
		_ = cmd.Wait()

		// The file must be consistent and hold every acknowledged reading.
		st, err := storage.Open(filepath.Join(data, "slogfeed.db"), storage.Options{LockTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		if err := st.Check(); err != nil {
			t.Fatalf("round %d: consistency check: %v", round, err)
		}
		for _, a := range acked {
			f, err := st.FeedBySlug(storage.KindSensor, a.sensor)
			if err != nil {
				t.Fatalf("round %d: sensor %s lost: %v", round, a.sensor, err)
			}
			if _, err := st.Item(f.ID, a.id); err != nil {
				t.Fatalf("round %d: acknowledged reading %s/%s lost: %v", round, a.sensor, a.id, err)
			}
		}
		st.Close()
	}
	if len(acked) < 20*20 {
		t.Fatalf("only %d readings acknowledged in 20 rounds", len(acked))
	}
	t.Logf("%d acknowledged readings survived 20 SIGKILLs", len(acked))
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// freeAddrs returns n distinct loopback addresses whose ports are free
// right now and lie below Linux's ephemeral range (32768 and up), so that
// no outgoing connection of a process started before another (an embedded
// NATS server dialing its routes) takes a port chosen for the next one.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	port := 20000 + rand.IntN(10000)
	for tries := 0; len(lns) < n && tries < 5000; tries++ {
		port++
		if port >= 32768 {
			port = 20000
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		lns = append(lns, ln)
	}
	if len(lns) < n {
		t.Fatalf("found %d free ports below 32768, want %d", len(lns), n)
	}
	addrs := make([]string, n)
	for i, ln := range lns {
		addrs[i] = ln.Addr().String()
	}
	return addrs
}
