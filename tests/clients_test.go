package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Clients other than the Go one, driven by their own scripts in clients/.
// They run when the interpreter and library are installed (.ci/run
// installs them) and are skipped otherwise.

func TestPikaSeedScenario(t *testing.T) {
	python := findPython(t)
	s := start(t)
	out := runClient(t, exec.Command(python, "clients/pika_seed.py", port(s)))
	want := "UnroutableError 1\nrouted\nae_queue Hello World! text/plain 2\n"
	if out != want {
		t.Fatalf("pika printed:\n%s\nwant:\n%s", out, want)
	}
}

func TestAmqplib(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		skipFor(t, "amqplib", "node is not installed")
	}
	modules, _ := filepath.Abs("clients/node_modules")
	if _, err := os.Stat(filepath.Join(modules, "amqplib")); err != nil {
		skipFor(t, "amqplib", "amqplib is not installed (npm install --prefix tests/clients amqplib@0.10)")
	}
	s := start(t)
	cmd := exec.Command(node, "clients/amqplib_check.js", port(s))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	out := runClient(t, cmd)
	headers := `{"n":1,"s":"x","a":[1,"y"],"t":{"b":true}}`
	want := "got usd.stock usd.stock " + headers + " 2\ngot eur.stock.db eur.stock.db " + headers + " 2\ncheckExchange 404\n"
	if out != want {
		t.Fatalf("amqplib printed:\n%s\nwant:\n%s", out, want)
	}
}

func findPython(t *testing.T) string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import pika").Run() == nil {
			return path
		}
	}
	skipFor(t, "pika", "no python3 with pika (apt-get install python3-pika)")
	return ""
}

func port(s *server) string {
	hostport := strings.TrimSuffix(strings.TrimPrefix(s.url, "amqp://guest:guest@"), "/")
	return hostport[strings.LastIndex(hostport, ":")+1:]
}

func runClient(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", cmd, err, out, stderr)
	}
	return string(out)
}
