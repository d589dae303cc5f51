// Command validate loads a compose file the way `docker compose config` does (schema,
// interpolation, references between services) without needing a Docker engine, and
// prints the normalized project as JSON for driftlab's own checks.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: validate COMPOSE_FILE")
		os.Exit(2)
	}
	opts, err := cli.NewProjectOptions([]string{os.Args[1]}, cli.WithOsEnv, cli.WithName("driftlab"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "compose file:", err)
		os.Exit(1)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "compose file:", err)
		os.Exit(1)
	}
	out, err := project.MarshalJSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compose file:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
