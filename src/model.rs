//! The neutral model in the middle of portico: `Call` in, `Outcome` out.
//! It owns no protocol knowledge: it must never mention MCP eras, HTTP headers or JSON-RPC codes.

use serde_json::{Map, Value};

/// Protocol metadata that a binding extracted from a call (or from REST headers).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meta {
    /// The platform's profile URI (USP `_meta.usp.profile`, UCP `meta["ucp-agent"].profile`).
    pub profile: Option<String>,
    /// Idempotency key for state-modifying calls.
    pub idempotency_key: Option<String>,
    /// Correlation id joining logs across parties.
    pub correlation_id: Option<String>,
    /// Conditional-write revision (`If-Match`).
    pub if_match: Option<String>,
    /// Presented credentials (kept opaque here; verified by the security layer).
    pub authorization: Option<Value>,
    /// Values minted for this call, when a transform or the binding reads them.
    pub minted: Option<Minted>,
}

/// Values minted once per call: a request id (sent by bindings that send one), a fresh UUID and
/// the time the call started (RFC 3339, UTC).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Minted {
    pub request_id: String,
    pub uuid: String,
    pub now: String,
}

/// One tool invocation, independent of the edge it arrived on.
#[derive(Debug, Clone)]
pub struct Call {
    /// Tool name as exposed to MCP clients.
    pub tool: String,
    /// Arguments with the binding's metadata removed.
    pub args: Value,
    /// The metadata the binding extracted.
    pub meta: Meta,
    /// The JSON-RPC request the arguments were read from, as the client sent it, when a body
    /// may be lent from it (`translate::lent`); `None` on every other edge.
    pub text: Option<bytes::Bytes>,
}

/// A business outcome message (`messages[]` entry): not an error of the protocol.
pub type Message = Value;

/// What the far side made of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The call did what it was asked; `body` is the protocol-shaped payload.
    Success { body: Value },
    /// The call was processed but the business said no (slot taken, validation...).
    Business {
        body: Map<String, Value>,
        messages: Vec<Message>,
    },
    /// The call could not be processed.
    Failure(Failure),
}

/// Why a call could not be processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The request itself is malformed or violates the schema.
    InvalidRequest,
    /// Credentials missing or rejected.
    Unauthenticated,
    /// Authenticated but not allowed.
    Forbidden,
    /// The addressed resource does not exist.
    NotFound,
    /// Conflicting state (e.g. idempotency key reuse).
    Conflict,
    /// A conditional write lost (If-Match).
    PreconditionFailed,
    /// Too many requests.
    RateLimited,
    /// The backend answered with a server error.
    UpstreamError,
    /// The backend could not be reached or is shedding load.
    Unavailable,
    /// The backend did not answer in time.
    Timeout,
    /// The backend answered something portico cannot interpret.
    BadUpstreamResponse,
    /// A fault inside portico.
    Internal,
}

/// A failed call with everything a binding needs to render it.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub kind: FailureKind,
    /// The binding's error code slug when one was chosen by a mapping rule (`slot_unavailable`,
    /// `invalid_request`...); `None` lets the binding pick its default for `kind`.
    pub code: Option<String>,
    /// Human-readable explanation (never contains secrets).
    pub message: String,
    /// HTTP status of the backend answer, when there was one.
    pub status: Option<u16>,
    /// RFC 9457 problem details returned by the backend, carried through.
    pub problem: Option<Box<Value>>,
    /// Seconds from a `Retry-After` header.
    pub retry_after: Option<u64>,
    /// Render as an MCP `isError` result rather than a JSON-RPC error, when the binding allows.
    pub as_tool_error: bool,
    /// The JSON-RPC error message carries the explanation too (`slug: message`), not only
    /// `data.content`: for a mistake the caller fixes in its own request (misplaced metadata),
    /// which clients show by their exception's message alone.
    pub explain: bool,
}

impl Failure {
    /// A failure of the given kind with a message and nothing else.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            code: None,
            message: message.into(),
            status: None,
            problem: None,
            retry_after: None,
            as_tool_error: false,
            explain: false,
        }
    }

    /// Sets the binding code slug.
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// The explanation goes into the JSON-RPC error message too (see `explain`).
    pub fn explained(mut self) -> Self {
        self.explain = true;
        self
    }
}
