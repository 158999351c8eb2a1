//! What can go wrong with a request, as a closed set of classes counted in the statistics
//! ([`ErrorClass`]), and the `SERVER_ERROR` line a client receives when a memcached server
//! fails it ([`Failure`]). Every request that does not end in a normal answer (a value, a
//! miss, `STORED`) counts exactly once, in the class of its first failure; a client
//! disconnected with answers it never read counts once more, in [`ErrorClass::ClientWrite`].

use serde::Serialize;
use std::net::SocketAddr;
use std::time::Duration;

/// Why a request did not get a normal answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// A command outside the subset (`ERROR`).
    UnknownCommand,
    /// A malformed line, key or data block (`CLIENT_ERROR ...`).
    ClientError,
    /// A value above the item size limit (`SERVER_ERROR object too large for cache`).
    TooLarge,
    /// A command line without end within its limit (answered, then the connection is closed).
    LineTooLong,
    /// The client closed its connection in the middle of a request.
    ClientClosedMidRequest,
    /// A command began with the binary protocol's magic byte: the connection is closed.
    BinaryProtocol,
    /// A client's answers could not be written: the client is gone, or its buffered answers
    /// made no progress for `server_timeout` (it does not read) and it was disconnected. Counted
    /// once per write that failed or per client disconnected; answers already buffered were
    /// counted when they were handed to the client's socket.
    ClientWrite,
    /// A server answered `ERROR`, `CLIENT_ERROR` or `SERVER_ERROR` (relayed to the client).
    ServerErrorReply,
    /// A replica answered `NOT_STORED`/`EXISTS`/`NOT_FOUND` to a `set` (relayed).
    NotStored,
    /// A server stayed silent for `server_timeout` while a reply was due.
    ServerTimeout,
    /// A server closed the connection or reset it.
    ServerClosed,
    /// A server sent bytes that are not a memcached reply.
    ServerGarbage,
    /// No connection to a server: connecting failed, or it is waiting to reconnect.
    ServerUnavailable,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 13] = [
        ErrorClass::UnknownCommand,
        ErrorClass::ClientError,
        ErrorClass::TooLarge,
        ErrorClass::LineTooLong,
        ErrorClass::ClientClosedMidRequest,
        ErrorClass::BinaryProtocol,
        ErrorClass::ClientWrite,
        ErrorClass::ServerErrorReply,
        ErrorClass::NotStored,
        ErrorClass::ServerTimeout,
        ErrorClass::ServerClosed,
        ErrorClass::ServerGarbage,
        ErrorClass::ServerUnavailable,
    ];
    pub const COUNT: usize = ErrorClass::ALL.len();

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::UnknownCommand => "unknown_command",
            ErrorClass::ClientError => "client_error",
            ErrorClass::TooLarge => "too_large",
            ErrorClass::LineTooLong => "line_too_long",
            ErrorClass::ClientClosedMidRequest => "client_closed_mid_request",
            ErrorClass::BinaryProtocol => "binary_protocol",
            ErrorClass::ClientWrite => "client_write",
            ErrorClass::ServerErrorReply => "server_error_reply",
            ErrorClass::NotStored => "not_stored",
            ErrorClass::ServerTimeout => "server_timeout",
            ErrorClass::ServerClosed => "server_closed",
            ErrorClass::ServerGarbage => "server_garbage",
            ErrorClass::ServerUnavailable => "server_unavailable",
        }
    }

    pub(crate) fn index(self) -> usize {
        ErrorClass::ALL.iter().position(|&c| c == self).expect("every class is in ALL")
    }
}

/// How a memcached server failed a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Timeout(Duration),
    Closed,
    Garbage(&'static str),
    /// Not connected; the next attempt is `retry_in` away (zero: connecting failed just now).
    Unavailable {
        retry_in: Duration,
    },
}

impl Failure {
    pub fn class(self) -> ErrorClass {
        match self {
            Failure::Timeout(_) => ErrorClass::ServerTimeout,
            Failure::Closed => ErrorClass::ServerClosed,
            Failure::Garbage(_) => ErrorClass::ServerGarbage,
            Failure::Unavailable { .. } => ErrorClass::ServerUnavailable,
        }
    }

    /// The line the client receives: `SERVER_ERROR backend HOST:PORT <what happened>`.
    pub fn reply(self, server: SocketAddr) -> Vec<u8> {
        let what = match self {
            Failure::Timeout(d) => format!("timed out after {} ms", d.as_millis()),
            Failure::Closed => "closed the connection".to_string(),
            Failure::Garbage(why) => format!("sent a malformed reply ({why})"),
            Failure::Unavailable { retry_in } if retry_in.is_zero() => "is unreachable".to_string(),
            Failure::Unavailable { retry_in } => {
                format!("is unavailable (reconnecting in {} ms)", retry_in.as_millis().max(1))
            }
        };
        format!("SERVER_ERROR backend {server} {what}\r\n").into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_have_distinct_names_and_indices() {
        let names: std::collections::HashSet<_> = ErrorClass::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), ErrorClass::COUNT);
        for (i, c) in ErrorClass::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }

    #[test]
    fn failure_lines_name_the_server() {
        let s: SocketAddr = "127.0.0.1:11211".parse().unwrap();
        assert_eq!(
            Failure::Timeout(Duration::from_millis(250)).reply(s),
            b"SERVER_ERROR backend 127.0.0.1:11211 timed out after 250 ms\r\n"
        );
        let line = Failure::Unavailable { retry_in: Duration::from_millis(40) }.reply(s);
        assert_eq!(line, b"SERVER_ERROR backend 127.0.0.1:11211 is unavailable (reconnecting in 40 ms)\r\n");
    }
}
