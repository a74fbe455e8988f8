package executor

import "github.com/stepseq/stepseq/executor/core"

// The reconcile core lives in executor/core; these names let the drivers and
// faces that use them from executor keep doing so while they move to it.

type (
	TryState      = core.TryState
	Limit         = core.Limit
	PlanFile      = core.PlanFile
	PlanRecord    = core.PlanRecord
	ActivePlan    = core.ActivePlan
	PlanUpdate    = core.PlanUpdate
	PlanIntake    = core.PlanIntake
	ConfigError   = core.ConfigError
	Action        = core.Action
	AgentExited   = core.AgentExited
	CondSet       = core.CondSet
	Decision      = core.Decision
	Effect        = core.Effect
	Entry         = core.Entry
	Exit          = core.Exit
	Facts         = core.Facts
	FilesChanged  = core.FilesChanged
	InheritedGone = core.InheritedGone
	Input         = core.Input
	JournalEntry  = core.JournalEntry
	Log           = core.Log
	Machine       = core.Machine
	MachineConfig = core.MachineConfig
	Notification  = core.Notification
	Notify        = core.Notify
	PlanEdited    = core.PlanEdited
	Probe         = core.Probe
	ReadState     = core.ReadState
	ReportIn      = core.ReportIn
	ReportVerdict = core.ReportVerdict
	RunCurrent    = core.RunCurrent
	SetTimer      = core.SetTimer
	SetWatch      = core.SetWatch
	Shutdown      = core.Shutdown
	StartAgent    = core.StartAgent
	StateRead     = core.StateRead
	StopAgent     = core.StopAgent
	TimerFired    = core.TimerFired
	Trigger       = core.Trigger
	TriggerBurst  = core.TriggerBurst
	TriggersIn    = core.TriggersIn
	Verdict       = core.Verdict
	WaitInherited = core.WaitInherited
	WriteState    = core.WriteState
	Written       = core.Written
)

const (
	LimitWaiting            = core.LimitWaiting
	LimitBackoffMin         = core.LimitBackoffMin
	LimitBackoffMax         = core.LimitBackoffMax
	EventWaitingLimit       = core.EventWaitingLimit
	PlanInvalid             = core.PlanInvalid
	PlanWaiting             = core.PlanWaiting
	PlanActive              = core.PlanActive
	PlanFinished            = core.PlanFinished
	MtimeSlack              = core.MtimeSlack
	DefaultLaunchTimeout    = core.DefaultLaunchTimeout
	DefaultMilestoneTimeout = core.DefaultMilestoneTimeout
	DefaultHeartbeat        = core.DefaultHeartbeat
	ErrorChars              = core.ErrorChars
	Idle                    = core.Idle
	Launch                  = core.Launch
	Gated                   = core.Gated
	Delayed                 = core.Delayed
	Blocked                 = core.Blocked
	Running                 = core.Running
)

var (
	LimitWait        = core.LimitWait
	ResumeOn         = core.ResumeOn
	ChoosePlans      = core.ChoosePlans
	ErrConfig        = core.ErrConfig
	FirstChars       = core.FirstChars
	BeginTry         = core.BeginTry
	BlockerText      = core.BlockerText
	MergePlan        = core.MergePlan
	OnMatches        = core.OnMatches
	Prompt           = core.Prompt
	Record           = core.Record
	Rerun            = core.Rerun
	Retry            = core.Retry
	RetryLimit       = core.RetryLimit
	Reconcile        = core.Reconcile
	NewMachine       = core.NewMachine
	CoalesceTriggers = core.CoalesceTriggers
)
