//! `/db?id=N`: one indexed point lookup in PostgreSQL, seed 003's database test
//! (`SELECT * FROM emp where id = ...` on a table `emp(id int primary key, firstName
//! varchar(100))`), and seed 000's "DB bound micro benchmark" (one database call per request).
//!
//! The server process owns a [`DbPool`] of connections to the database named by `serve --db
//! postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME`, opened at start-up (see
//! [`crate::pool`]: reused, reopened after a failure, a lease waits at most `--db-wait-ms` and
//! then the request answers 503). Each connection prepares the statement [`QUERY`] once; a
//! request then sends one Bind (the id as a binary int4, no SQL text, no formatting), Execute
//! and Sync, and blocks in `read` on the calling thread until PostgreSQL answers: blocking I/O
//! with a real server's latency, like `/call`, so a single event loop stalls while it waits.
//! The body is the row as JSON, `{"id":N,"firstName":"..."}` (seed 003 answers with the
//! record), so a client can check it against the table; an id with no row is a 404.
//!
//! The client is small and synchronous on purpose: message framing and the authentication
//! exchanges (cleartext, MD5, SCRAM-SHA-256) come from the `postgres-protocol` crate, and the
//! I/O is a plain blocking `TcpStream`, which works in every architecture (an async client's
//! runtime cannot block inside another runtime's worker, e.g. the `tokio` architecture's).
//! The table is made by the lab (`python/archlab/lab/services/postgres.py`). Database socket
//! calls are not counted by the server's read/write counters, which measure its clients' I/O.

use crate::pool::Pool;
use crate::WorkError;
use bytes::{BufMut, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::backend::{ErrorResponseBody, Message};
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// Largest `/db?id=`: PostgreSQL's `integer`.
pub const DB_MAX_ID: u64 = i32::MAX as u64;
/// Connections per server process unless `--db-pool` says otherwise: HikariCP's default
/// `maximumPoolSize` (10), the usual JDBC pool of a Java server like the seeds'.
pub const DB_POOL_DEFAULT: usize = 10;
/// Largest `--db-pool`; PostgreSQL's own `max_connections` must also allow it.
pub const DB_POOL_MAX: usize = 1024;
/// How long a request waits for a free connection by default before answering 503.
pub const DB_WAIT_DEFAULT_MS: u64 = 1000;
/// Largest `--db-wait-ms`.
pub const DB_WAIT_MAX_MS: u64 = 60_000;
/// The lookup every `/db` request runs, prepared once per connection.
pub const QUERY: &str = "SELECT id, first_name FROM emp WHERE id = $1";
/// The allowed form of `--db`, for error messages and help.
pub const DB_URL_FORM: &str = "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME with HOST an IP address or localhost, e.g. postgresql://archlab@127.0.0.1:5432/archlab";

const STATEMENT: &str = "archlab_db_by_id";
const INT4_OID: u32 = 23;
const DEFAULT_PORT: u16 = 5432;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A query that takes longer is abandoned (503) and its connection closed.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the database is and who connects: the parsed `--db` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct DbConfig {
    pub addr: SocketAddr,
    pub user: String,
    pub password: Option<String>,
    pub dbname: String,
}

/// The URL without its password (for messages and logs).
impl fmt::Display for DbConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "postgresql://{}@{}/{}", self.user, self.addr, self.dbname)
    }
}

impl fmt::Debug for DbConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl DbConfig {
    /// Parse `postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME` (also `postgres://`); user,
    /// password and database name may be percent-encoded. Errors give the allowed form.
    pub fn parse(url: &str) -> Result<DbConfig, String> {
        DbConfig::from_url(url).map_err(|why| format!("expected {DB_URL_FORM}, got {url:?} ({why})"))
    }

    /// As [`DbConfig::parse`], the error saying only what is wrong with `url`.
    pub fn from_url(url: &str) -> Result<DbConfig, &'static str> {
        let rest = url
            .strip_prefix("postgresql://")
            .or_else(|| url.strip_prefix("postgres://"))
            .ok_or("the scheme must be postgresql://")?;
        if rest.contains('?') || rest.contains('#') {
            return Err("no ?options or #fragment are accepted");
        }
        let (userinfo, rest) = rest.rsplit_once('@').ok_or("USER@ is missing")?;
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(decode(p).ok_or("bad %-escape in the password")?)),
            None => (userinfo, None),
        };
        let user = decode(user).filter(|u| !u.is_empty()).ok_or("USER is empty or badly %-escaped")?;
        let (hostport, dbname) = rest.split_once('/').ok_or("/DBNAME is missing")?;
        let dbname = decode(dbname).filter(|d| !d.is_empty()).ok_or("DBNAME is empty or badly %-escaped")?;
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, p) = v6.split_once(']').ok_or("unclosed [ in the host")?;
            // After `]`: nothing, or `:PORT` (anything else fails as a bad PORT below).
            (h, if p.is_empty() { None } else { Some(p.strip_prefix(':').unwrap_or(p)) })
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        let ip: IpAddr = match host {
            "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
            h => h.parse().map_err(|_| "HOST must be an IP address or localhost")?,
        };
        let port = match port {
            None => DEFAULT_PORT,
            Some(p) => p.parse::<u16>().ok().filter(|&p| p != 0).ok_or("PORT must be in 1..=65535")?,
        };
        Ok(DbConfig { addr: SocketAddr::new(ip, port), user, password, dbname })
    }

    /// The whole URL, password included (percent-encoded), which [`DbConfig::parse`] reads back:
    /// for handing the configuration to another process. `Display` leaves the password out.
    pub fn url(&self) -> String {
        let password = self.password.as_deref().map(|p| format!(":{}", encode(p))).unwrap_or_default();
        format!("postgresql://{}{password}@{}/{}", encode(&self.user), self.addr, encode(&self.dbname))
    }
}

/// Percent-encoding of one URL component: everything but unreserved characters is escaped.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-decoding of one URL component; `None` for a malformed escape or invalid UTF-8.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The process's connections to the database of `/db`.
pub struct DbPool {
    config: DbConfig,
    pool: Pool<Connection>,
}

impl fmt::Debug for DbPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DbPool({}, {} connections)", self.config, self.pool.size())
    }
}

impl DbPool {
    /// Open `size` connections to `config` now, each with [`QUERY`] prepared; the error says
    /// which connection failed and why (e.g. PostgreSQL's own message).
    pub fn open(config: DbConfig, size: usize, wait: Duration) -> Result<DbPool, String> {
        let mut n = 0;
        let pool = Pool::open(size, wait, || {
            n += 1;
            Connection::open(&config).map_err(|e| format!("connection {n} of {size} to {config}: {e}"))
        })?;
        Ok(DbPool { config, pool })
    }

    pub fn config(&self) -> &DbConfig {
        &self.config
    }

    pub fn size(&self) -> usize {
        self.pool.size()
    }

    /// Append the row `id` as JSON to `out` (left as it was on an error).
    pub(crate) fn lookup(&self, id: u32, out: &mut Vec<u8>) -> Result<(), WorkError> {
        let unavailable = |reason: String| WorkError::Unavailable { workload: "/db", reason };
        let Some(mut lease) = self.pool.lease() else {
            return Err(unavailable(format!(
                "no database connection came free within {} ms (all {} in use; raise --db-pool or --db-wait-ms)",
                self.pool.wait().as_millis(),
                self.pool.size()
            )));
        };
        let start = out.len();
        // A kept connection may have died with the database meanwhile: one retry on a new one.
        let mut retry = lease.conn.is_some();
        loop {
            let conn = match lease.conn.as_mut() {
                Some(c) => c,
                None => lease.conn.insert(
                    Connection::open(&self.config)
                        .map_err(|e| unavailable(format!("cannot connect to {}: {e}", self.config)))?,
                ),
            };
            match conn.lookup(id, out) {
                Ok(true) => return Ok(()),
                Ok(false) => {
                    return Err(WorkError::NotFound {
                        workload: "/db",
                        reason: format!("no row with id {id} in table emp"),
                    })
                }
                Err(QueryError::Server(msg)) => {
                    out.truncate(start);
                    return Err(unavailable(format!("{}: {msg}", self.config)));
                }
                Err(QueryError::Io(e)) => {
                    out.truncate(start);
                    lease.conn = None;
                    if !retry {
                        return Err(unavailable(format!("{}: {e}", self.config)));
                    }
                    retry = false;
                }
            }
        }
    }
}

enum QueryError {
    /// The connection is unusable (closed, timed out, protocol violation): drop it.
    Io(io::Error),
    /// PostgreSQL answered with an error; the connection is ready for the next query.
    Server(String),
}

impl From<io::Error> for QueryError {
    fn from(e: io::Error) -> Self {
        QueryError::Io(e)
    }
}

struct Connection {
    stream: TcpStream,
    rbuf: BytesMut,
    wbuf: BytesMut,
}

fn protocol(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// `ERROR 42P01: relation "emp" does not exist`.
fn describe(e: &ErrorResponseBody) -> String {
    let (mut severity, mut code, mut message) = (String::new(), String::new(), String::new());
    let mut fields = e.fields();
    while let Ok(Some(f)) = fields.next() {
        let text = String::from_utf8_lossy(f.value_bytes()).into_owned();
        match f.type_() {
            b'S' => severity = text,
            b'C' => code = text,
            b'M' => message = text,
            _ => {}
        }
    }
    format!("{severity} {code}: {message}")
}

impl Connection {
    /// Connect, start up, authenticate and prepare [`QUERY`].
    fn open(config: &DbConfig) -> io::Result<Connection> {
        let stream = TcpStream::connect_timeout(&config.addr, CONNECT_TIMEOUT)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        let mut c = Connection { stream, rbuf: BytesMut::with_capacity(8192), wbuf: BytesMut::with_capacity(256) };
        let params =
            [("user", config.user.as_str()), ("database", config.dbname.as_str()), ("application_name", "archlab")];
        frontend::startup_message(params, &mut c.wbuf)?;
        c.send()?;
        c.authenticate(config)?;
        c.until_ready().map_err(|e| match e {
            QueryError::Io(e) => e,
            QueryError::Server(m) => protocol(m),
        })?;
        frontend::parse(STATEMENT, QUERY, [INT4_OID], &mut c.wbuf)?;
        frontend::sync(&mut c.wbuf);
        c.send()?;
        c.until_ready().map_err(|e| match e {
            QueryError::Io(e) => e,
            QueryError::Server(m) => protocol(format!("cannot prepare {QUERY:?}: {m} (the lab creates table emp)")),
        })?;
        Ok(c)
    }

    fn authenticate(&mut self, config: &DbConfig) -> io::Result<()> {
        let password = || {
            config.password.as_deref().map(str::as_bytes).ok_or_else(|| {
                protocol("the server asks for a password; give one in --db postgresql://USER:PASSWORD@...".into())
            })
        };
        loop {
            match self.read_message()? {
                Message::AuthenticationOk => return Ok(()),
                Message::AuthenticationCleartextPassword => frontend::password_message(password()?, &mut self.wbuf)?,
                Message::AuthenticationMd5Password(body) => {
                    let hash = md5_hash(config.user.as_bytes(), password()?, body.salt());
                    frontend::password_message(hash.as_bytes(), &mut self.wbuf)?;
                }
                Message::AuthenticationSasl(body) => {
                    let mut mechanisms = body.mechanisms();
                    let mut scram = false;
                    while let Some(m) = mechanisms.next()? {
                        scram |= m == sasl::SCRAM_SHA_256;
                    }
                    if !scram {
                        return Err(protocol(
                            "the server offers no SASL mechanism this client has (SCRAM-SHA-256)".into(),
                        ));
                    }
                    let mut exchange = sasl::ScramSha256::new(password()?, sasl::ChannelBinding::unsupported());
                    frontend::sasl_initial_response(sasl::SCRAM_SHA_256, exchange.message(), &mut self.wbuf)?;
                    self.send()?;
                    let Message::AuthenticationSaslContinue(body) = self.read_message()? else {
                        return Err(protocol("SCRAM: expected the server's first message".into()));
                    };
                    exchange.update(body.data())?;
                    frontend::sasl_response(exchange.message(), &mut self.wbuf)?;
                    self.send()?;
                    match self.read_message()? {
                        Message::AuthenticationSaslFinal(body) => exchange.finish(body.data())?,
                        Message::ErrorResponse(e) => return Err(protocol(describe(&e))),
                        _ => return Err(protocol("SCRAM: expected the server's final message".into())),
                    }
                    continue;
                }
                Message::ErrorResponse(e) => return Err(protocol(describe(&e))),
                _ => {
                    return Err(protocol(
                        "unsupported authentication request (this client speaks cleartext, MD5 and SCRAM-SHA-256)"
                            .into(),
                    ))
                }
            }
            self.send()?;
        }
    }

    fn send(&mut self) -> io::Result<()> {
        self.stream.write_all(&self.wbuf)?;
        self.wbuf.clear();
        Ok(())
    }

    fn read_message(&mut self) -> io::Result<Message> {
        loop {
            if let Some(m) = Message::parse(&mut self.rbuf)? {
                return Ok(m);
            }
            let mut chunk = [0u8; 8192];
            let n = match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the database closed the connection"))
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no answer within {} s", IO_TIMEOUT.as_secs()),
                    ))
                }
                Err(e) => return Err(e),
            };
            self.rbuf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Read up to ReadyForQuery, ignoring everything but errors (start-up and Parse).
    fn until_ready(&mut self) -> Result<(), QueryError> {
        let mut error = None;
        loop {
            match self.read_message()? {
                Message::ReadyForQuery(_) => return error.map_or(Ok(()), |e| Err(QueryError::Server(e))),
                Message::ErrorResponse(e) => error = Some(describe(&e)),
                _ => {}
            }
        }
    }

    /// Run the prepared lookup; Ok(found) after appending the row's JSON when found.
    fn lookup(&mut self, id: u32, out: &mut Vec<u8>) -> Result<bool, QueryError> {
        let id = i32::try_from(id).map_err(|_| QueryError::Server(format!("id {id} is beyond integer")))?;
        frontend::bind(
            "",
            STATEMENT,
            [1i16], // the parameter in binary
            [id],
            |v, buf| {
                buf.put_i32(v);
                Ok(IsNull::No)
            },
            [0i16], // results as text: the body is built from them as they are
            &mut self.wbuf,
        )
        .map_err(|_| protocol("cannot encode Bind".into()))?;
        frontend::execute("", 0, &mut self.wbuf)?;
        frontend::sync(&mut self.wbuf);
        self.send()?;
        let mut found = false;
        let mut error = None;
        loop {
            match self.read_message()? {
                Message::DataRow(row) if !found => {
                    let buf = row.buffer();
                    let mut ranges = row.ranges();
                    let id_text = ranges.next()?.flatten().map(|r| &buf[r]).unwrap_or(b"null");
                    let name = ranges.next()?.flatten().map(|r| &buf[r]);
                    out.extend_from_slice(b"{\"id\":");
                    out.extend_from_slice(id_text);
                    out.extend_from_slice(b",\"firstName\":");
                    match name {
                        Some(name) => json_string(name, out),
                        None => out.extend_from_slice(b"null"),
                    }
                    out.push(b'}');
                    found = true;
                }
                Message::ErrorResponse(e) => error = Some(describe(&e)),
                Message::ReadyForQuery(_) => break,
                Message::BindComplete
                | Message::DataRow(_)
                | Message::CommandComplete(_)
                | Message::NoticeResponse(_)
                | Message::ParameterStatus(_) => {}
                _ => return Err(QueryError::Io(protocol("unexpected message in a query's answer".into()))),
            }
        }
        match error {
            Some(e) => Err(QueryError::Server(e)),
            None => Ok(found),
        }
    }
}

/// `s` (UTF-8 text from PostgreSQL) as a JSON string literal.
fn json_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x1f => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 15)]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_url_forms() {
        let c = DbConfig::parse("postgresql://archlab:s%40cret@127.0.0.1:5433/lab").unwrap();
        assert_eq!(c.addr, "127.0.0.1:5433".parse().unwrap());
        assert_eq!((c.user.as_str(), c.password.as_deref(), c.dbname.as_str()), ("archlab", Some("s@cret"), "lab"));
        // The password never shows.
        assert_eq!(c.to_string(), "postgresql://archlab@127.0.0.1:5433/lab");
        assert_eq!(format!("{c:?}"), c.to_string());
        assert_eq!(DbConfig::parse(&c.url()).unwrap(), c, "{}", c.url());
        assert_eq!(c.url(), "postgresql://archlab:s%40cret@127.0.0.1:5433/lab");
        let c = DbConfig::parse("postgres://u@localhost/d").unwrap();
        assert_eq!((c.addr, c.password), ("127.0.0.1:5432".parse().unwrap(), None));
        let c = DbConfig::parse("postgresql://u@[::1]:6000/d").unwrap();
        assert_eq!(c.addr, "[::1]:6000".parse().unwrap());
        assert_eq!(DbConfig::parse("postgresql://u@[::1]/d").unwrap().addr.port(), 5432);
    }

    #[test]
    fn refuses_bad_urls_with_the_allowed_form() {
        for (url, why) in [
            ("127.0.0.1:5432", "scheme"),
            ("mysql://u@127.0.0.1/d", "scheme"),
            ("postgresql://127.0.0.1/d", "USER@"),
            ("postgresql://@127.0.0.1/d", "USER is empty"),
            ("postgresql://u@127.0.0.1", "/DBNAME"),
            ("postgresql://u@127.0.0.1/", "DBNAME is empty"),
            ("postgresql://u@db.example/d", "IP address"),
            ("postgresql://u@127.0.0.1:0/d", "PORT"),
            ("postgresql://u@127.0.0.1:99999/d", "PORT"),
            ("postgresql://u@127.0.0.1/d?sslmode=require", "?options"),
            ("postgresql://u:%zz@127.0.0.1/d", "%-escape"),
            ("postgresql://u@[::1/d", "unclosed"),
        ] {
            let e = DbConfig::parse(url).unwrap_err();
            assert!(e.starts_with(&format!("expected {DB_URL_FORM}, got {url:?}")), "{e}");
            assert!(e.contains(why), "{url}: {e}");
        }
    }

    #[test]
    fn json_strings_are_escaped() {
        let mut out = Vec::new();
        json_string(b"a\"b\\c\nd\x01\xc3\xa9", &mut out);
        assert_eq!(out, b"\"a\\\"b\\\\c\\u000ad\\u0001\xc3\xa9\"");
    }

    #[test]
    fn an_unreachable_database_is_a_clear_start_up_error() {
        // A port that was free a moment ago: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = DbConfig::parse(&format!("postgresql://u@127.0.0.1:{port}/d")).unwrap();
        let e = DbPool::open(config, 2, Duration::from_millis(10)).unwrap_err();
        assert!(e.starts_with(&format!("connection 1 of 2 to postgresql://u@127.0.0.1:{port}/d: ")), "{e}");
    }
}
