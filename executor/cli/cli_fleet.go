package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/fleet"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// The fleet's commands: submit and worker, and --nats on runs, close, retry,
// approve, reject and budget. Without --nats nothing here connects anywhere.
// A command for a held run is a fleet.Control the worker watches.

// addFleet adds submit and worker to root and --nats to runs, close, retry,
// approve, reject and budget.
func addFleet(root *cobra.Command, g *globals, stdout io.Writer) {
	root.AddCommand(newSubmitCmd(g, stdout), newWorkerCmd(g))
	for _, c := range root.Commands() {
		switch c.Name() {
		case "runs":
			withNats(c, "", cobra.NoArgs, fleetRuns(stdout))
		case "close":
			withNats(c, "RUN", cobra.ExactArgs(1), fleetClose(stdout))
		case "retry":
			withNats(c, "[STEP] --run RUN", cobra.MaximumNArgs(1), fleetRetry(stdout))
		case "approve", "reject":
			withNats(c, "[STEP] --run RUN", cobra.MaximumNArgs(1), fleetAnswer(stdout, c.Name() == "approve"))
		case "budget":
			withNats(c, "--run RUN usd=+2", cobra.MinimumNArgs(1), fleetBudget(stdout))
		}
	}
}

// natsFlagUsage is --nats's help, the same on every command.
const natsFlagUsage = "act on the fleet of workers at this NATS server (nats://host:4222; several, comma-separated) instead of a workspace"

// withNats gives cmd --nats: given, cmd takes args and runs fleetRun instead
// of its own.
func withNats(cmd *cobra.Command, args string, check cobra.PositionalArgs, fleetRun func(*cobra.Command, string, []string) error) {
	var url string
	cmd.Flags().StringVar(&url, "nats", "", natsFlagUsage)
	own, ownArgs := cmd.RunE, cmd.Args
	cmd.Args = func(c *cobra.Command, a []string) error {
		if c.Flags().Changed("nats") {
			return check(c, a)
		}
		if ownArgs == nil {
			return nil
		}
		return ownArgs(c, a)
	}
	cmd.RunE = func(c *cobra.Command, a []string) error {
		if !c.Flags().Changed("nats") {
			return own(c, a)
		}
		if url == "" {
			return usageErr("--nats: give the server's URL, like nats://127.0.0.1:4222")
		}
		return fleetRun(c, url, a)
	}
	cmd.Example += fmt.Sprintf("\n  stepseq %s --nats nats://127.0.0.1:4222 %s", cmd.Name(), args)
}

// dialFleet connects to the fleet, an unreachable server or one with other
// settings being a configuration error.
func dialFleet(ctx context.Context, url, name string, replicas int) (*fleet.Conn, error) {
	c, err := fleet.Dial(ctx, url, fleet.Options{Name: name, Replicas: replicas})
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return c, nil
}

func newSubmitCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		url, repo, branch, name, paramsFile string
		params                              []string
		replicas                            int
		asJSON                              bool
	)
	cmd := &cobra.Command{
		Use:   "submit --nats URL PLAN --repo GIT_URL",
		Short: "Put a run of PLAN on the fleet's queue, for a worker to take",
		Long: `submit checks PLAN and its params, and that the repository GIT_URL can be read
and has the branch, then puts a run on the work queue of the NATS JetStream server
at URL (the stream STEPSEQ_RUNS, made when absent) and records it, queued, in the
bucket STEPSEQ_STATE. A worker (stepseq worker) takes it, clones the branch, runs
the plan as stepseq watch does, and pushes each verified step to the branch
stepseq/RUN. NAME is --run, else the plan's name and a short id.

stepseq runs --nats URL lists the fleet's runs; close, retry, approve, reject and
budget take --nats too.
` + exitCodesHelp,
		Example: `  stepseq submit --nats nats://127.0.0.1:4222 plans/review.yaml --repo git@github.com:me/app.git
  stepseq submit --nats nats://nats:4222 review.yaml --repo https://git.example/app.git --branch dev --param ticket=T-12 --run t12`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case url == "":
				return usageErr("--nats: give the server's URL, like nats://127.0.0.1:4222")
			case repo == "":
				return usageErr("--repo: give the git repository the workers clone")
			}
			if name != "" {
				if err := fleet.CheckRunName(name); err != nil {
					return usageErr("--run: %v", err)
				}
			}
			given, err := readParams(paramsFile, params)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			path := args[0]
			pf := engine.ReadPlanFile(path, path)
			if pf.Plan == nil {
				printPlanErrors(g.stderr, path, pf)
				return &exitError{code: 1, err: fmt.Errorf("%s is not a valid plan: nothing queued", path)}
			}
			if _, err := pf.Plan.ResolveParams(given); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("%s: %w: nothing queued", path, err)}
			}
			data, err := store.ReadFile(path, store.PlanCap)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := dialFleet(ctx, url, "stepseq submit", replicas)
			if err != nil {
				return err
			}
			defer c.Close()
			rec, err := fleet.Submit(ctx, c, fleet.Submission{Plan: data, File: filepath.Base(path), Repo: repo, Branch: branch, Params: given, Run: name})
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("%w: nothing queued", err)}
			}
			if asJSON {
				rec.Job = nil
				return writeJSON(stdout, rec)
			}
			_, err = fmt.Fprintf(stdout, "queued run %s: plan %s on %s (branch %s); its steps go to the branch %s\n",
				rec.Run, rec.Plan, rec.Repo, rec.Branch, fleet.RunBranch(rec.Run))
			return err
		},
	}
	cmd.Flags().StringVar(&url, "nats", "", "the NATS server's URL (nats://host:4222; several, comma-separated)")
	cmd.Flags().StringVar(&repo, "repo", "", "the git repository the run works in: a URL or a path every worker can clone and push to")
	cmd.Flags().StringVar(&branch, "branch", "", "the branch the run starts from (default the repository's default branch)")
	cmd.Flags().StringVar(&name, "run", "", "the run's name, and its branch stepseq/NAME (default the plan's name and a short id)")
	cmd.Flags().StringArrayVar(&params, "param", nil, "give the plan's param NAME the value VALUE, read as YAML (NAME=VALUE; repeatable)")
	cmd.Flags().StringVar(&paramsFile, "params", "", "read the plan's params from FILE, a JSON or YAML mapping (--param wins)")
	cmd.Flags().IntVar(&replicas, "replicas", 1, "replicas of the stream and bucket when this makes them (3 on a cluster of three)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run's record as a JSON object")
	return cmd
}

func newWorkerCmd(g *globals) *cobra.Command {
	var (
		url, workdir, name      string
		maxRuns, replicas       int
		lease                   time.Duration
		notifyCmds, notifyHooks []string
	)
	cmd := &cobra.Command{
		Use:   "worker --nats URL --workdir DIR",
		Short: "Take runs from the fleet's queue and run them, each in a fresh clone",
		Long: `worker takes runs from the work queue of the NATS JetStream server at URL while it
has room (--max-runs at once). For each it clones the run's repository into a fresh
folder under DIR (the branch stepseq/RUN when it exists: a run resumed), runs the
plan there as stepseq watch does (STEP_AGENT_CMD, the presets, sandbox and budgets
of this machine), and after each verified step commits the step's changes and
state.json and pushes them to stepseq/RUN.

It holds each run by a lease: it acks the run in progress every third of --lease
and writes the run's state to the bucket STEPSEQ_STATE by revision. A write that
finds another revision, or half a lease without one, is the lease lost: the run's
agent is stopped at once and the run left to the worker that took it. A worker that
dies stops acking; once --lease has passed, another worker takes the run, clones
its branch and resumes it from the newest state in the bucket, the step that was
running judged an interrupted try. Every worker gives the same --lease.

Each run's transitions are notifications, as under stepseq watch: the plan's
notify: sinks and those of --notify-command and --notify-webhook, from the run's
workspace on this worker.

SIGINT or SIGTERM stops the agents and hands the runs back to the queue.
` + exitCodesHelp + agentEnvHelp,
		Example: `  STEP_AGENT_CMD='claude -p' stepseq worker --nats nats://127.0.0.1:4222 --workdir /var/lib/stepseq
  stepseq worker --nats nats://a:4222,nats://b:4222 --workdir ./runs --max-runs 4 --lease 1m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case url == "":
				return usageErr("--nats: give the server's URL, like nats://127.0.0.1:4222")
			case workdir == "":
				return usageErr("--workdir: give the folder runs are cloned into")
			case maxRuns < 1:
				return usageErr("--max-runs %d: want 1 or more", maxRuns)
			case lease < time.Second:
				return usageErr("--lease %s: want 1s or more, like 30s", lease)
			}
			sinks, err := flagSinks(notifyCmds, notifyHooks)
			if err != nil {
				return err
			}
			log := g.logger()
			ctx := cmd.Context()
			if name == "" {
				host, _ := os.Hostname()
				name = fmt.Sprintf("%s-%d", host, os.Getpid())
			}
			c, err := fleet.Dial(ctx, url, fleet.Options{Name: "stepseq worker " + name, Replicas: replicas,
				OnDisconnect: func(err error) { log.Warn("disconnected from NATS: reconnecting", "err", err) }})
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			defer c.Close()
			w, err := fleet.NewWorker(ctx, c, fleet.WorkerOptions{Workdir: workdir, MaxRuns: maxRuns, Lease: lease, Name: name, Logger: log,
				Notifier: func(rt *engine.Runtime) (engine.Notifier, func(), error) {
					f, err := notify.NewFollower(notifyConfig(rt, sinks, nil), rt.WS.State)
					if err != nil {
						return nil, nil, err
					}
					return f, func() { _ = f.Close(notifyFlush) }, nil
				}})
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			return w.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&url, "nats", "", "the NATS server's URL (nats://host:4222; several, comma-separated)")
	cmd.Flags().StringVar(&workdir, "workdir", "", "the folder each run is cloned into, one fresh folder a run")
	cmd.Flags().IntVar(&maxRuns, "max-runs", 1, "runs at once on this worker")
	cmd.Flags().DurationVar(&lease, "lease", fleet.DefaultLease, "how long a silent worker keeps its runs; the same on every worker")
	cmd.Flags().StringVar(&name, "name", "", "the worker's name in stepseq runs --nats (default host-pid)")
	cmd.Flags().StringArrayVar(&notifyCmds, "notify-command", nil, "run this command for each notification of each run, the JSON on stdin (split on white space, no shell; repeatable)")
	cmd.Flags().StringArrayVar(&notifyHooks, "notify-webhook", nil, "POST each notification's JSON of each run to this http(s) URL (repeatable)")
	cmd.Flags().IntVar(&replicas, "replicas", 1, "replicas of the stream and bucket when this makes them (3 on a cluster of three)")
	return cmd
}

func fleetRuns(stdout io.Writer) func(*cobra.Command, string, []string) error {
	statuses := []string{fleet.StatusQueued, fleet.StatusRunning, fleet.StatusDone, fleet.StatusBlocked, fleet.StatusClosed}
	return func(cmd *cobra.Command, url string, _ []string) error {
		asJSON, _ := cmd.Flags().GetBool("json")
		status, _ := cmd.Flags().GetStringArray("status")
		for _, s := range status {
			if !slices.Contains(statuses, s) {
				return usageErr("--status %q: with --nats, want one of %s", s, strings.Join(statuses, ", "))
			}
		}
		c, err := dialFleet(cmd.Context(), url, "stepseq runs", 1)
		if err != nil {
			return err
		}
		defer c.Close()
		runs, err := fleet.List(cmd.Context(), c)
		if err != nil {
			return err
		}
		if len(status) > 0 {
			runs = slices.DeleteFunc(runs, func(r fleet.Record) bool { return !slices.Contains(status, r.Status) })
		}
		if asJSON {
			if runs == nil {
				runs = []fleet.Record{}
			}
			return writeJSON(stdout, runs)
		}
		if len(runs) == 0 {
			_, err := fmt.Fprintf(stdout, "no runs in the fleet at %s: submit one with stepseq submit --nats %s PLAN --repo GIT_URL\n", url, url)
			return err
		}
		var b bytes.Buffer
		writeFleetTable(&b, runs)
		_, err = stdout.Write(b.Bytes())
		return err
	}
}

// writeFleetTable writes the fleet's runs: name, status (with the reason of a
// blocked one), worker, step, phase, progress, spend, updated.
func writeFleetTable(b *bytes.Buffer, runs []fleet.Record) {
	rows := [][]string{{"RUN", "PLAN", "STATUS", "WORKER", "STEP", "PHASE", "DONE", "SPEND", "UPDATED"}}
	for _, r := range runs {
		status := r.Status
		if r.Reason != "" {
			status += ": " + clip(r.Reason, 60)
		}
		spend := "-"
		var sp planspec.Spend
		if len(r.Spend) > 0 && json.Unmarshal(r.Spend, &sp) == nil {
			spend = clip(sp.Text(), 40)
		}
		rows = append(rows, []string{r.Run, orDash(r.Plan), status, orDash(r.Worker), orDash(r.Step), orDash(r.Phase),
			fmt.Sprintf("%d/%d", r.Done, r.Steps), spend, r.Updated.Local().Format("2006-01-02 15:04:05")})
	}
	writeTable(b, rows, -1, false)
}

func fleetClose(stdout io.Writer) func(*cobra.Command, string, []string) error {
	return func(cmd *cobra.Command, url string, args []string) error {
		run := args[0]
		if err := fleet.CheckRunName(run); err != nil {
			return usageErr("%v", err)
		}
		asJSON, _ := cmd.Flags().GetBool("json")
		grace, _ := cmd.Flags().GetDuration("grace")
		ctx := cmd.Context()
		c, err := dialFleet(ctx, url, "stepseq close", 1)
		if err != nil {
			return err
		}
		defer c.Close()
		rec, err := fleet.Close(ctx, c, run, "stepseq close "+whoAmI())
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		if rec.Status == fleet.StatusRunning {
			// Its worker stops the agent, pushes and records it closed.
			wait, cancel := context.WithTimeout(ctx, fleet.DefaultLease+grace)
			defer cancel()
			if rec, err = fleet.WaitEnded(wait, c, run); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("close run %s: asked its worker %s, which has not closed it yet (%v): stepseq runs --nats shows when it does", run, rec.Worker, err)}
			}
		}
		if asJSON {
			rec.State, rec.Job = nil, nil
			return writeJSON(stdout, rec)
		}
		_, err = fmt.Fprintf(stdout, "closed run %s (its branch %s keeps what it did)\n", run, fleet.RunBranch(run))
		return err
	}
}

func fleetRetry(stdout io.Writer) func(*cobra.Command, string, []string) error {
	return func(cmd *cobra.Command, url string, args []string) error {
		run, _ := cmd.Flags().GetString("run")
		if run == "" {
			return usageErr("retry --nats: name the run with --run")
		}
		step := ""
		if len(args) > 0 {
			step = args[0]
		}
		ctx := cmd.Context()
		c, err := dialFleet(ctx, url, "stepseq retry", 1)
		if err != nil {
			return err
		}
		defer c.Close()
		rec, err := fleet.Retry(ctx, c, run, step, "stepseq retry "+whoAmI())
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		what := "run " + run
		if step != "" {
			what = "step " + step + " of run " + run
		}
		if rec.Status == fleet.StatusRunning {
			_, err = fmt.Fprintf(stdout, "asked worker %s to give %s a new try\n", rec.Worker, what)
			return err
		}
		_, err = fmt.Fprintf(stdout, "queued %s again: a worker resumes it from its newest state\n", what)
		return err
	}
}

// fleetAnswer answers a gate of a fleet's running run through its worker.
func fleetAnswer(stdout io.Writer, approve bool) func(*cobra.Command, string, []string) error {
	return func(cmd *cobra.Command, url string, args []string) error {
		run, _ := cmd.Flags().GetString("run")
		note, _ := cmd.Flags().GetString("note")
		if run == "" {
			return usageErr("%s --nats: name the run with --run", cmd.Name())
		}
		if !approve && strings.TrimSpace(note) == "" {
			return usageErr("reject --nats: %v", engine.ErrNoNote)
		}
		if err := engine.LaunchedAgent(os.Getenv); err != nil {
			return &exitError{code: 1, err: err}
		}
		a := fleet.GateAnswer{Approve: approve, Note: note}
		if len(args) > 0 {
			a.Step = args[0]
		}
		ctx := cmd.Context()
		c, err := dialFleet(ctx, url, "stepseq "+cmd.Name(), 1)
		if err != nil {
			return err
		}
		defer c.Close()
		rec, err := fleet.Answer(ctx, c, run, a, "stepseq "+cmd.Name()+" "+whoAmI())
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		_, err = fmt.Fprintf(stdout, "asked worker %s to %s the gate of run %s\n", rec.Worker, cmd.Name(), run)
		return err
	}
}

// fleetBudget changes what a fleet's run may spend: through its worker when
// one runs it, else in its record, for the worker that takes it next.
func fleetBudget(stdout io.Writer) func(*cobra.Command, string, []string) error {
	return func(cmd *cobra.Command, url string, args []string) error {
		run, _ := cmd.Flags().GetString("run")
		if run == "" {
			return usageErr("budget --nats: name the run with --run")
		}
		for _, a := range args {
			if !strings.Contains(a, "=") {
				return usageErr("budget --nats: want changes like usd=+2, got %q (a fleet's run is named by --run, never a DIR)", a)
			}
		}
		if err := engine.AgentBudget(os.Getenv); err != nil {
			return &exitError{code: 1, err: err}
		}
		step, _ := cmd.Flags().GetString("step")
		ctx := cmd.Context()
		c, err := dialFleet(ctx, url, "stepseq budget", 1)
		if err != nil {
			return err
		}
		defer c.Close()
		_, said, err := fleet.Budget(ctx, c, run, fleet.BudgetOrder{Step: step, Changes: args}, "stepseq budget "+whoAmI())
		switch {
		case errors.Is(err, core.ErrBudgetChange):
			return usageErr("%v", err)
		case err != nil:
			return &exitError{code: 1, err: err}
		}
		_, err = fmt.Fprintln(stdout, strings.ReplaceAll(said, "--nats URL", "--nats "+url))
		return err
	}
}

// whoAmI names who gave a command, for the run's record.
func whoAmI() string {
	host, _ := os.Hostname()
	user := os.Getenv("USER")
	if user == "" {
		user = "?"
	}
	return user + "@" + host
}
