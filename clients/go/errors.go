package raftlock

import (
	"errors"
	"fmt"
)

// The API's error codes (docs/api.md) are the Code constants of
// codes_gen.go, generated with their retry classes from raftlock-api's
// ErrorCode; these are the few the client produces itself.
const (
	// CodeUnavailable is the client's own: no endpoint could be reached,
	// so the request was never delivered and nothing changed.
	CodeUnavailable = "unavailable"
	// CodeTLS is the client's own: the TLS handshake failed (a server
	// certificate not signed by Config.CACert, or the server refusing
	// the client's certificate or its lack of one). Nothing was applied,
	// and it is not retried.
	CodeTLS = "tls"
	// CodeProtocol is the client's own: an answer it could not
	// understand (not raftlock, or an incompatible version).
	CodeProtocol = "protocol"
)

// Error is every failure the cluster reports, and the client's own
// transport failures (CodeUnavailable, CodeTLS, CodeOutcomeUnknown
// without an answer, CodeProtocol). Compare with the sentinels:
//
//	if errors.Is(err, raftlock.ErrLockHeld) { ... }
//
// or read the fields with errors.As.
type Error struct {
	// Code is the API's error code, e.g. "lock_held" (see the Code
	// constants).
	Code string
	// Status is the HTTP status of the answer; 0 when the error was
	// decided by the client (bad input it refused to send, no endpoint
	// reachable, an answer lost in transit).
	Status int
	// Message is the server's (or the client's) human text.
	Message string
	// Err is the underlying cause when there is one (a network error, a
	// context's error); errors.Is and errors.As see through to it.
	Err error
}

func (e *Error) Error() string {
	text := "raftlock: " + e.Code
	if e.Message != "" {
		text += ": " + e.Message
	}
	if e.Err != nil && (e.Message == "" || e.Message != e.Err.Error()) {
		text += ": " + e.Err.Error()
	}
	return text
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Code (the
// sentinels carry only a Code).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// OutcomeUnknown reports whether a write may or may not have been
// applied: its answer was lost, the server said so (outcome_unknown,
// internal, shutting_down: the contract's outcome-unknown class), or the
// answer could not be understood. Every other error is definite: nothing
// changed.
func (e *Error) OutcomeUnknown() bool {
	return codeOutcomeUnknown(e.Code) || e.Code == CodeProtocol
}

// Sentinels, one per error code, for errors.Is. Only Code is compared.
var (
	ErrBadRequest           = &Error{Code: CodeBadRequest}
	ErrSessionNotFound      = &Error{Code: CodeSessionNotFound}
	ErrNotFound             = &Error{Code: CodeNotFound}
	ErrNotOwner             = &Error{Code: CodeNotOwner}
	ErrLockHeld             = &Error{Code: CodeLockHeld}
	ErrTimeout              = &Error{Code: CodeTimeout}
	ErrNoLeader             = &Error{Code: CodeNoLeader}
	ErrTooLarge             = &Error{Code: CodeTooLarge}
	ErrVersionMismatch      = &Error{Code: CodeVersionMismatch}
	ErrNotLeader            = &Error{Code: CodeNotLeader}
	ErrUnsupportedMediaType = &Error{Code: CodeUnsupportedMediaType}
	ErrMethodNotAllowed     = &Error{Code: CodeMethodNotAllowed}
	ErrWithdrawn            = &Error{Code: CodeWithdrawn}
	ErrUnauthorized         = &Error{Code: CodeUnauthorized}
	ErrForbidden            = &Error{Code: CodeForbidden}
	ErrNotEmpty             = &Error{Code: CodeNotEmpty}
	ErrEphemeralParent      = &Error{Code: CodeEphemeralParent}
	ErrSessionConflict      = &Error{Code: CodeSessionConflict}
	ErrSequenceExhausted    = &Error{Code: CodeSequenceExhausted}
	ErrAlreadyGranted       = &Error{Code: CodeAlreadyGranted}
	ErrOutcomeUnknown       = &Error{Code: CodeOutcomeUnknown}
	ErrShuttingDown         = &Error{Code: CodeShuttingDown}
	ErrNotCaughtUp          = &Error{Code: CodeNotCaughtUp}
	ErrInternal             = &Error{Code: CodeInternal}
	ErrLimitMismatch        = &Error{Code: CodeLimitMismatch}
	ErrUnavailable          = &Error{Code: CodeUnavailable}
	ErrProtocol             = &Error{Code: CodeProtocol}
	ErrTLS                  = &Error{Code: CodeTLS}
)

// Errors of the recipes (Session, Mutex, Election, RWLock, Semaphore,
// MultiLock), not of the API.
var (
	// ErrSessionLost: the session is, or may be, gone; Session.Err says
	// why (it also matches ErrSessionClosed, ErrSessionNotFound or
	// ErrKeepaliveFailed). Locks taken through it may be held by others.
	ErrSessionLost = errors.New("raftlock: session lost")
	// ErrSessionClosed: Session.Close was called.
	ErrSessionClosed = errors.New("raftlock: session closed")
	// ErrKeepaliveFailed: no keepalive succeeded in time; the cluster may
	// expire the session from a safety margin after this on.
	ErrKeepaliveFailed = errors.New("raftlock: no keepalive succeeded in time")
	// ErrNotLocked: Unlock (or Release) of a lock this handle does not
	// hold.
	ErrNotLocked = errors.New("raftlock: mutex is not locked by this handle")
)

// lostError is what Session.Err returns: it matches ErrSessionLost and,
// through Unwrap, the reason.
type lostError struct{ reason error }

func (e *lostError) Error() string        { return "raftlock: session lost: " + e.reason.Error() }
func (e *lostError) Unwrap() error        { return e.reason }
func (e *lostError) Is(target error) bool { return target == ErrSessionLost }

// apiError builds an *Error decided by the client.
func apiError(code string, format string, args ...interface{}) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// isCode reports whether err is an *Error with one of codes.
func isCode(err error, codes ...string) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	for _, c := range codes {
		if e.Code == c {
			return true
		}
	}
	return false
}

// alreadyGone reports whether err says a release-like request found
// nothing to do: the session has no node there (not_found, not_owner) or
// no longer exists (session_not_found).
func alreadyGone(err error) bool {
	return isCode(err, CodeNotFound, CodeNotOwner, CodeSessionNotFound)
}
