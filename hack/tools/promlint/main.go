// promlint checks Prometheus text exposition read from stdin as `promtool check metrics` does:
// it runs client_golang's testutil/promlint (the linter promtool uses) and prints each problem
// as `metric: text`, exiting 1 when there is one (3 when the input does not parse). Built by
// hack/promlint.sh; used by cmd/hypercloud/tests/ccm_runtime.rs on a controller manager's
// /metrics.
package main

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func main() {
	problems, err := promlint.New(os.Stdin).Lint()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error while linting: %v\n", err)
		os.Exit(3)
	}
	for _, p := range problems {
		fmt.Fprintf(os.Stderr, "%s: %s\n", p.Metric, p.Text)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}
