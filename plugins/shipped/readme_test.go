package shipped_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenmq/warren/plugins/shipped"
)

// readmeSections are the sections every shipped plugin's README has, in
// this order, as level-2 headings (the layout of CoreDNS's plugin
// READMEs: a reader finds the same thing in the same place in each).
var readmeSections = []string{"Name", "Description", "Syntax", "Examples", "Differences from RabbitMQ"}

// TestShippedReadmes checks that each plugin Warren ships has a folder
// (plugins/<name>) with a README.md titled with the plugin's name and
// holding the required sections, in order.
func TestShippedReadmes(t *testing.T) {
	names := shipped.Names()
	if len(names) == 0 {
		t.Fatal("no shipped plugins")
	}
	for _, name := range names {
		path := filepath.Join("..", name, "README.md")
		f, err := os.Open(path)
		if err != nil {
			t.Errorf("shipped plugin %s: %v", name, err)
			continue
		}
		var title string
		var sections []string
		inCode := false
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "```") {
				inCode = !inCode
			}
			switch {
			case inCode:
			case strings.HasPrefix(line, "# ") && title == "":
				title = strings.TrimSpace(line[2:])
			case strings.HasPrefix(line, "## "):
				sections = append(sections, strings.TrimSpace(line[3:]))
			}
		}
		f.Close()
		if title != name {
			t.Errorf("%s: title %q, want %q", path, title, "# "+name)
		}
		next := 0
		for _, s := range sections {
			if next < len(readmeSections) && s == readmeSections[next] {
				next++
			}
		}
		if next < len(readmeSections) {
			t.Errorf("%s: sections %q; want %q in this order (missing or out of order: %q)",
				path, sections, readmeSections, readmeSections[next])
		}
	}
}
