// Code generated from ErrorCode (crates/raftlock-api/src/error.rs) by `cargo run -p raftlock-api --bin raftlock-codes`. DO NOT EDIT.

package raftlock

// API error codes (docs/api.md, "Errors").
const (
	CodeBadRequest           = "bad_request"
	CodeSessionNotFound      = "session_not_found"
	CodeNotFound             = "not_found"
	CodeNotOwner             = "not_owner"
	CodeLockHeld             = "lock_held"
	CodeTimeout              = "timeout"
	CodeNoLeader             = "no_leader"
	CodeTooLarge             = "too_large"
	CodeVersionMismatch      = "version_mismatch"
	CodeNotLeader            = "not_leader"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUnauthorized         = "unauthorized"
	CodeForbidden            = "forbidden"
	CodeWithdrawn            = "withdrawn"
	CodeNotEmpty             = "not_empty"
	CodeEphemeralParent      = "ephemeral_parent"
	CodeSessionConflict      = "session_conflict"
	CodeSequenceExhausted    = "sequence_exhausted"
	CodeAlreadyGranted       = "already_granted"
	CodeOutcomeUnknown       = "outcome_unknown"
	CodeShuttingDown         = "shutting_down"
	CodeNotCaughtUp          = "not_caught_up"
	CodeMemberExists         = "member_exists"
	CodeMemberReplaced       = "member_replaced"
	CodeOtherCluster         = "other_cluster"
	CodeMemberUnreachable    = "member_unreachable"
	CodeLastVoter            = "last_voter"
	CodeMembershipChanging   = "membership_changing"
	CodeStorageFailed        = "storage_failed"
	CodeDiskFull             = "disk_full"
	CodeInternal             = "internal"
	CodeTooManyRequests      = "too_many_requests"
	CodeRequestTimeout       = "request_timeout"
	CodeLimitMismatch        = "limit_mismatch"
	CodeNotHolder            = "not_holder"
	CodeOverloaded           = "overloaded"
)

// codeStatus is the HTTP status the API answers code with; 0 for a
// code it does not have.
func codeStatus(code string) int {
	switch code {
	case CodeBadRequest:
		return 400
	case CodeUnauthorized:
		return 401
	case CodeNotOwner, CodeForbidden:
		return 403
	case CodeSessionNotFound, CodeNotFound:
		return 404
	case CodeMethodNotAllowed:
		return 405
	case CodeTimeout, CodeRequestTimeout:
		return 408
	case CodeLockHeld, CodeVersionMismatch, CodeNotLeader, CodeWithdrawn, CodeNotEmpty, CodeEphemeralParent, CodeSessionConflict, CodeSequenceExhausted, CodeAlreadyGranted, CodeMemberExists, CodeOtherCluster, CodeLastVoter, CodeLimitMismatch, CodeNotHolder:
		return 409
	case CodeTooLarge:
		return 413
	case CodeUnsupportedMediaType:
		return 415
	case CodeTooManyRequests:
		return 429
	case CodeInternal:
		return 500
	case CodeNoLeader, CodeOutcomeUnknown, CodeShuttingDown, CodeNotCaughtUp, CodeMemberReplaced, CodeMemberUnreachable, CodeMembershipChanging, CodeStorageFailed, CodeDiskFull, CodeOverloaded:
		return 503
	}
	return 0
}

// codeNotApplied reports whether code says a definite refusal: the request changed nothing.
func codeNotApplied(code string) bool {
	switch code {
	case CodeBadRequest, CodeSessionNotFound, CodeNotFound, CodeNotOwner, CodeLockHeld, CodeTimeout, CodeNoLeader, CodeTooLarge, CodeVersionMismatch, CodeNotLeader, CodeUnsupportedMediaType, CodeMethodNotAllowed, CodeUnauthorized, CodeForbidden, CodeWithdrawn, CodeNotEmpty, CodeEphemeralParent, CodeSessionConflict, CodeSequenceExhausted, CodeAlreadyGranted, CodeMemberExists, CodeMemberReplaced, CodeOtherCluster, CodeMemberUnreachable, CodeLastVoter, CodeMembershipChanging, CodeStorageFailed, CodeDiskFull, CodeTooManyRequests, CodeRequestTimeout, CodeLimitMismatch, CodeNotHolder, CodeOverloaded:
		return true
	}
	return false
}

// codeOutcomeUnknown reports whether code says a write may or may not have been applied.
func codeOutcomeUnknown(code string) bool {
	switch code {
	case CodeOutcomeUnknown, CodeShuttingDown, CodeInternal:
		return true
	}
	return false
}

// codeRetryElsewhere reports whether code says this member cannot serve now and another can.
func codeRetryElsewhere(code string) bool {
	switch code {
	case CodeShuttingDown, CodeMemberReplaced, CodeStorageFailed, CodeDiskFull, CodeOverloaded:
		return true
	}
	return false
}

// codeRetryLater reports whether code says nothing was done and the cause passes by itself: retry after a pause.
func codeRetryLater(code string) bool {
	switch code {
	case CodeNoLeader, CodeMemberUnreachable, CodeMembershipChanging, CodeDiskFull, CodeTooManyRequests, CodeOverloaded:
		return true
	}
	return false
}
