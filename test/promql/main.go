// promql-check reads one PromQL expression per line on stdin and parses each with Prometheus's own parser
// (github.com/prometheus/prometheus/promql/parser), so the chart's alert rules and the Grafana dashboard are
// checked by the grammar Prometheus will apply to them. Exit status 1 names every expression that fails.
package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	p := parser.NewParser(parser.Options{})
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	failed := 0
	for lines.Scan() {
		if lines.Text() == "" {
			continue
		}
		if _, err := p.ParseExpr(lines.Text()); err != nil {
			fmt.Printf("%s\n  %v\n", lines.Text(), err)
			failed++
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
}
