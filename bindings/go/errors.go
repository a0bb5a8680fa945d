package dtrain

import (
	"fmt"

	"dtrain.dev/dtrain/internal/cdt"
)

// Status codes of libdtrain (dt_status). They are only ever appended.
const (
	StatusOK              int32 = 0
	StatusInvalidArgument int32 = 1
	StatusOutOfMemory     int32 = 2
	StatusUnsupported     int32 = 3
	StatusNotFound        int32 = 4
	StatusIO              int32 = 5
	StatusComm            int32 = 6
	StatusTimeout         int32 = 7
	StatusAborted         int32 = 8
	StatusInternal        int32 = 9
	StatusUnavailable     int32 = 10 // a service cannot take the request now (a server draining or failed)
	StatusCancelled       int32 = 11 // the call was cancelled (a context ended, or a stream was left early)
)

// Error is a failed libdtrain call: its status code and the library's message for it.
// Compare the kind of failure with errors.Is against the sentinels below, which match any
// *Error of the same status:
//
//	if errors.Is(err, dtrain.ErrIO) { ... }
//
// Cause is what made the call fail from outside the library, if anything: a call of a
// ...Context method that its context stopped returns an *Error of StatusCancelled whose
// Cause is ctx.Err(), so both errors.Is(err, dtrain.ErrCancelled) and
// errors.Is(err, context.Canceled) (or context.DeadlineExceeded) hold.
type Error struct {
	Status  int32
	Message string
	Cause   error
}

// Sentinels for errors.Is, one per status code. Only their Status is compared.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrOutOfMemory     = &Error{Status: StatusOutOfMemory}
	ErrUnsupported     = &Error{Status: StatusUnsupported}
	ErrNotFound        = &Error{Status: StatusNotFound}
	ErrIO              = &Error{Status: StatusIO}
	ErrComm            = &Error{Status: StatusComm}
	ErrTimeout         = &Error{Status: StatusTimeout}
	ErrAborted         = &Error{Status: StatusAborted}
	ErrInternal        = &Error{Status: StatusInternal}
	ErrUnavailable     = &Error{Status: StatusUnavailable}
	ErrCancelled       = &Error{Status: StatusCancelled}
)

// StatusName returns the name of a status code ("DT_OK", "DT_ERR_IO", ...;
// "DT_ERR_UNKNOWN" for a code this library does not know).
func StatusName(status int32) string { return cdt.Dt_status_string(status) }

// StatusName returns the name of the error's status code, e.g. "DT_ERR_IO".
func (e *Error) StatusName() string { return StatusName(e.Status) }

// Error formats the error as "<status name>: <message>", followed by ": <cause>" when
// there is a Cause.
func (e *Error) Error() string {
	s := e.StatusName()
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the Cause (nil for most errors), for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is an *Error with the same status, so that
// errors.Is(err, dtrain.ErrNotFound) tests the kind of failure.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Status == e.Status
}

// check turns a raw call's status into nil or an *Error.
func check(st cdt.Status) error {
	if st.Code == StatusOK {
		return nil
	}
	return &Error{Status: st.Code, Message: st.Message}
}

// invalid is an error the binding itself finds before calling the library.
func invalid(format string, args ...any) error {
	return &Error{Status: StatusInvalidArgument, Message: "dtrain: " + fmt.Sprintf(format, args...)}
}
