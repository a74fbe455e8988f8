package watcher

// op is what happened to a path, in fsnotify's terms.
type op uint8

const (
	opCreate op = 1 << iota // created, or moved in
	opWrite                 // written
	opRemove                // removed
	opRename                // moved away
	opChmod                 // attributes changed
)

// kind says whether an event's path is a directory, when the source knows.
type kind uint8

const (
	kindUnknown kind = iota // stat to find out
	kindDir
	kindFile
)

// event is one file event: an absolute, clean path and what happened to it.
type event struct {
	name string
	op   op
	kind kind
}

func (e event) has(o op) bool { return e.op&o != 0 }

// eventSlices is how many slices of events a notifier reads ahead of the
// loop: it keeps reading the kernel's queue while the loop waits for a CPU.
const eventSlices = 4

// notifier is the source of file events: directory watches in, slices of
// events out. Events come in slices, each what one read of the kernel's queue
// held, so that a burst wakes the loop once per slice rather than once per
// event. Add and Remove are called from one goroutine at a time.
type notifier interface {
	// Add watches the directory dir (not its subdirectories).
	Add(dir string) error
	// Remove releases the watch on dir; an error only says it was gone.
	Remove(dir string) error
	// Events delivers the events, a slice at a time; it is closed by Close.
	Events() <-chan []event
	// Errors delivers errors, fsnotify.ErrEventOverflow among them; it is
	// closed by Close.
	Errors() <-chan error
	// WatchList lists the watched directories.
	WatchList() []string
	// Close releases every watch and closes the channels.
	Close() error
}
