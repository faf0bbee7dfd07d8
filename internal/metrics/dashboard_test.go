package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// recording is a Registerer that keeps what is registered.
type recording struct{ collectors []prometheus.Collector }

func (r *recording) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}
func (r *recording) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}
func (r *recording) Unregister(prometheus.Collector) bool { return false }

// TestDashboardChartsServedMetrics: every Cove metric the Grafana
// dashboard (deploy/grafana/cove.json) queries is one Cove serves, so
// that no chart stays empty after a rename.
func TestDashboardChartsServedMetrics(t *testing.T) {
	reg := &recording{}
	NewNode(reg)
	NewHTTP(reg)
	served := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	ch := make(chan *prometheus.Desc, 64)
	for _, c := range reg.collectors {
		c.Describe(ch)
	}
	close(ch)
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			served[m[1]] = true
		}
	}
	raw, err := os.ReadFile("../../deploy/grafana/cove.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	name := regexp.MustCompile(`cove_[a-z_]+`)
	charted := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				base := n
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					base = strings.TrimSuffix(base, suffix)
				}
				if !served[base] {
					t.Errorf("panel %q queries %s, which Cove does not serve", p.Title, n)
				}
				charted++
			}
		}
	}
	if charted == 0 || len(served) < 10 {
		t.Errorf("%d metrics charted, %d served", charted, len(served))
	}
}
