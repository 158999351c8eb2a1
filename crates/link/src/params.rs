//! What a link applies, in two stages: [`RawLink`] holds the values as given (each direction's
//! own value, the value for both directions, or nothing), and [`LinkConfig::new`] resolves and
//! checks them into one [`DirectionParams`] per direction. Every refusal is an
//! [`InvalidParam`] naming the parameter (the flag's name without `--`, e.g. `delay-up`), the
//! values allowed and the value received.
//!
//! Units follow `tc`: rates in bits per second with SI prefixes (`100mbit`), sizes in bytes
//! with SI or IEC prefixes (`64KiB`, `1MB`). Durations arrive already parsed (the lab's
//! duration syntax belongs to the load generator's parser), so a negative delay is refused
//! where it is parsed.

use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// Smallest MTU accepted: the minimum datagram every IPv4 host must accept (RFC 791).
pub const MTU_MIN: u32 = 576;
/// Largest MTU accepted: the largest IPv4 datagram.
pub const MTU_MAX: u32 = 65_535;
/// The MTU of an Ethernet link, the default.
pub const MTU_DEFAULT: u32 = 1500;
/// Largest one-way delay accepted: every packet in flight is held in memory, so a delay far
/// beyond any real path only risks exhausting it.
pub const DELAY_MAX: Duration = Duration::from_secs(10);
/// Fastest rate accepted, in bits per second (100 Gbit/s; the forwarder is much slower).
pub const RATE_MAX_BPS: u64 = 100_000_000_000;
/// The smallest default queue of a rate-limited direction (the default is one bandwidth-delay
/// product of the round trip, but at least this).
pub const QUEUE_DEFAULT_MIN_BYTES: u64 = 64 * 1024;
/// The seed of loss and jitter draws when none is given.
pub const DEFAULT_SEED: u64 = 1;
/// Longest link name: namespace names are `alk-NAME-client` and `alk-NAME-server`.
pub const NAME_MAX_CHARS: usize = 32;

/// A refused parameter: which one, what is allowed, what was received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidParam {
    /// The flag's name without `--`, e.g. `delay-up`.
    pub param: String,
    pub allowed: String,
    pub received: String,
}

impl InvalidParam {
    pub(crate) fn new(param: impl Into<String>, allowed: impl Into<String>, received: impl fmt::Display) -> Self {
        InvalidParam { param: param.into(), allowed: allowed.into(), received: received.to_string() }
    }
}

impl fmt::Display for InvalidParam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: expected {}, got {}", self.param, self.allowed, self.received)
    }
}

impl std::error::Error for InvalidParam {}

/// The two directions of a link. `Up` carries what the client side sends to the server side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client side to server side (requests).
    Up,
    /// Server side to client side (responses).
    Down,
}

impl Direction {
    pub const ALL: [Direction; 2] = [Direction::Up, Direction::Down];

    pub fn name(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
        }
    }

    /// 0 for up, 1 for down: the key of the direction's random streams.
    pub fn index(self) -> usize {
        match self {
            Direction::Up => 0,
            Direction::Down => 1,
        }
    }
}

/// A rate as given: a number of bits per second, or no limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateSetting {
    Unlimited,
    BitsPerSecond(u64),
}

/// Parse a rate the way `tc` writes it: a number and one of `bit`, `kbit`, `mbit`, `gbit`
/// (powers of 1000, case-insensitive), e.g. `100mbit`, `1.5gbit`; or `unlimited`.
pub fn parse_rate(s: &str) -> Result<RateSetting, String> {
    let t = s.trim().to_ascii_lowercase();
    if t == "unlimited" {
        return Ok(RateSetting::Unlimited);
    }
    let expected = "a rate such as 100mbit (units bit, kbit, mbit, gbit), or unlimited";
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.trim().parse().map_err(|_| format!("expected {expected}, got {s:?}"))?;
    let scale = match unit {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "" => return Err(format!("expected {expected}: the unit is required, got {s:?}")),
        _ => return Err(format!("expected {expected}, got {s:?}")),
    };
    let bps = value * scale;
    if !bps.is_finite() || bps < 1.0 {
        return Err(format!("a rate must be at least 1bit (omit the flag or say unlimited for no limit), got {s:?}"));
    }
    if bps > RATE_MAX_BPS as f64 {
        return Err(format!("a rate must be at most 100gbit, got {s:?}"));
    }
    Ok(RateSetting::BitsPerSecond(bps.round() as u64))
}

/// Parse a size in bytes: a number and an optional unit `B`, `KB`, `MB` (powers of 1000) or
/// `KiB`, `MiB` (powers of 1024), case-insensitive, e.g. `64KiB`, `1500`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let expected = "a size in bytes such as 65536, 64KiB or 1MB (units B, KB, MB, KiB, MiB)";
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.trim().parse().map_err(|_| format!("expected {expected}, got {s:?}"))?;
    let scale = match unit {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        _ => return Err(format!("expected {expected}, got {s:?}")),
    };
    let bytes = value * scale;
    if !bytes.is_finite() || bytes < 0.0 || bytes.fract() != 0.0 || bytes > (1u64 << 40) as f64 {
        return Err(format!("expected {expected} (a whole number of bytes up to 1 TiB), got {s:?}"));
    }
    Ok(bytes as u64)
}

/// Parse a loss probability: a number in [0, 1] or a percentage (`1%`).
pub fn parse_loss(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (t, 1.0),
    };
    let p = num
        .trim()
        .parse::<f64>()
        .map(|v| v * scale)
        .map_err(|_| format!("expected a probability in [0, 1] or a percentage such as 1%, got {s:?}"))?;
    check_loss(p).map_err(|allowed| format!("expected {allowed}, got {s:?}"))
}

fn check_loss(p: f64) -> Result<f64, &'static str> {
    if p.is_finite() && (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err("a probability in [0, 1] (or a percentage 0%..100%)")
    }
}

/// The values of one direction as given; `None` means not given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawDirection {
    pub delay: Option<Duration>,
    pub jitter: Option<Duration>,
    pub rate: Option<RateSetting>,
    pub queue_bytes: Option<u64>,
    pub burst_bytes: Option<u64>,
    pub loss: Option<f64>,
}

/// A link as given: values for both directions, overridden per direction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawLink {
    pub name: String,
    pub mtu: Option<u32>,
    pub both: RawDirection,
    pub up: RawDirection,
    pub down: RawDirection,
    /// Let jitter reorder packets (off: a packet never leaves before the one ahead of it).
    pub reorder: bool,
    pub seed: Option<u64>,
    /// TCP congestion control of both sides' stacks (e.g. `cubic`); None: the host's default.
    pub congestion: Option<String>,
}

/// The rate limiter of a direction: a token bucket filled at `rate_bps` holding at most
/// `burst_bytes`, in front of which at most `queue_bytes` wait (more are dropped at the tail).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RateLimit {
    pub rate_bps: u64,
    pub queue_bytes: u64,
    pub burst_bytes: u64,
}

/// What one direction applies, checked.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DirectionParams {
    /// One-way delay added to every packet after the rate limiter.
    #[serde(rename = "delay_us", serialize_with = "as_us")]
    pub delay: Duration,
    /// Each packet's delay is drawn uniformly from `delay ± jitter` (netem's default law).
    #[serde(rename = "jitter_us", serialize_with = "as_us")]
    pub jitter: Duration,
    pub rate: Option<RateLimit>,
    /// Probability that a packet is dropped on arrival, independently of every other.
    pub loss: f64,
    pub reorder: bool,
}

impl DirectionParams {
    /// A direction that forwards every packet at once.
    pub const TRANSPARENT: DirectionParams =
        DirectionParams { delay: Duration::ZERO, jitter: Duration::ZERO, rate: None, loss: 0.0, reorder: false };

    /// Whether anything random is drawn for this direction.
    pub fn is_random(&self) -> bool {
        self.loss > 0.0 || !self.jitter.is_zero()
    }
}

fn as_us<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_nanos() as f64 / 1e3)
}

/// A link name: lower-case letters, digits and `-`, starting with a letter or digit.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LinkName(String);

impl LinkName {
    pub fn new(name: &str) -> Result<LinkName, InvalidParam> {
        let ok = !name.is_empty()
            && name.len() <= NAME_MAX_CHARS
            && !name.starts_with('-')
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(LinkName(name.to_string()))
        } else {
            Err(InvalidParam::new(
                "name",
                format!("1 to {NAME_MAX_CHARS} characters of a-z, 0-9 and '-', not starting with '-'"),
                format!("{name:?}"),
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LinkName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A checked link: its name, MTU, what each direction applies and the seed of its draws.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    pub name: LinkName,
    pub mtu: u32,
    pub up: DirectionParams,
    pub down: DirectionParams,
    pub seed: u64,
    /// TCP congestion control both namespaces' stacks use; None: the host's default (new
    /// namespaces inherit it).
    pub congestion: Option<String>,
}

impl LinkConfig {
    /// Resolve and check a raw link: each direction takes its own value, else the value for
    /// both, else the default (nothing applied).
    pub fn new(raw: &RawLink) -> Result<LinkConfig, InvalidParam> {
        let name = LinkName::new(&raw.name)?;
        let mtu = raw.mtu.unwrap_or(MTU_DEFAULT);
        if !(MTU_MIN..=MTU_MAX).contains(&mtu) {
            return Err(InvalidParam::new("mtu", format!("bytes in {MTU_MIN}..={MTU_MAX}"), mtu));
        }
        let delay_of = |d: Direction| pick(raw, d, "delay", |r| r.delay).map_or(Duration::ZERO, |(v, _)| v);
        // The default queue holds one bandwidth-delay product of the round trip.
        let round_trip = delay_of(Direction::Up) + delay_of(Direction::Down);
        let mut up = resolve(raw, Direction::Up, mtu, round_trip)?;
        let mut down = resolve(raw, Direction::Down, mtu, round_trip)?;
        if raw.reorder {
            if up.jitter.is_zero() && down.jitter.is_zero() {
                return Err(InvalidParam::new("reorder", "only with a jitter (nothing else reorders)", "reorder"));
            }
            up.reorder = true;
            down.reorder = true;
        }
        if let (false, Some(seed)) = (up.is_random() || down.is_random(), raw.seed) {
            return Err(InvalidParam::new("seed", "only when something is random (a loss or a jitter)", seed));
        }
        let congestion = raw.congestion.as_deref().map(check_congestion).transpose()?;
        Ok(LinkConfig { name, mtu, up, down, seed: raw.seed.unwrap_or(DEFAULT_SEED), congestion })
    }

    pub fn direction(&self, d: Direction) -> &DirectionParams {
        match d {
            Direction::Up => &self.up,
            Direction::Down => &self.down,
        }
    }
}

/// The value of `field` for direction `d` and the name of the flag it came from.
fn pick<T>(raw: &RawLink, d: Direction, stem: &str, field: impl Fn(&RawDirection) -> Option<T>) -> Option<(T, String)> {
    let own = match d {
        Direction::Up => &raw.up,
        Direction::Down => &raw.down,
    };
    field(own).map(|v| (v, format!("{stem}-{}", d.name()))).or_else(|| field(&raw.both).map(|v| (v, stem.to_string())))
}

fn resolve(raw: &RawLink, d: Direction, mtu: u32, round_trip: Duration) -> Result<DirectionParams, InvalidParam> {
    let delay = match pick(raw, d, "delay", |r| r.delay) {
        Some((v, flag)) if v > DELAY_MAX => {
            return Err(InvalidParam::new(flag, format!("a delay of at most {DELAY_MAX:?}"), format!("{v:?}")))
        }
        Some((v, _)) => v,
        None => Duration::ZERO,
    };
    let jitter = match pick(raw, d, "jitter", |r| r.jitter) {
        Some((v, flag)) if v > delay => {
            return Err(InvalidParam::new(
                flag,
                format!("a jitter of at most the delay of the direction ({delay:?}), so that no draw is clipped at 0"),
                format!("{v:?}"),
            ))
        }
        Some((v, _)) => v,
        None => Duration::ZERO,
    };
    let loss = match pick(raw, d, "loss", |r| r.loss) {
        Some((p, flag)) => check_loss(p).map_err(|allowed| InvalidParam::new(flag, allowed, p))?,
        None => 0.0,
    };
    let queue = pick(raw, d, "queue", |r| r.queue_bytes);
    let burst = pick(raw, d, "burst", |r| r.burst_bytes);
    let rate = match pick(raw, d, "rate", |r| r.rate) {
        Some((RateSetting::BitsPerSecond(bps), flag)) if bps == 0 || bps > RATE_MAX_BPS => {
            return Err(InvalidParam::new(flag, "a rate in 1bit..=100gbit (or unlimited)", format!("{bps}bit")))
        }
        Some((RateSetting::BitsPerSecond(rate_bps), _)) => {
            let bdp_bytes = (rate_bps as u128 * round_trip.as_nanos() / 8_000_000_000) as u64;
            let queue_bytes = at_least_mtu(queue, mtu)?.unwrap_or(bdp_bytes.max(QUEUE_DEFAULT_MIN_BYTES));
            let burst_bytes = at_least_mtu(burst, mtu)?.unwrap_or(mtu as u64);
            Some(RateLimit { rate_bps, queue_bytes, burst_bytes })
        }
        Some((RateSetting::Unlimited, _)) | None => {
            if let Some((v, flag)) = queue.or(burst) {
                return Err(InvalidParam::new(
                    flag,
                    format!("a rate limit on the {} direction first (this sizes the rate limiter)", d.name()),
                    v,
                ));
            }
            None
        }
    };
    Ok(DirectionParams { delay, jitter, rate, loss, reorder: false })
}

/// The name of a congestion control algorithm, as the kernel spells them (`TCP_CA_NAME_MAX` is
/// 16 bytes with the NUL). Whether this kernel has it is known only when the link is created.
fn check_congestion(name: &str) -> Result<String, InvalidParam> {
    let ok = (1..=15).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(name.to_string())
    } else {
        Err(InvalidParam::new(
            "congestion",
            "a TCP congestion control name such as cubic, reno or bbr",
            format!("{name:?}"),
        ))
    }
}

fn at_least_mtu(v: Option<(u64, String)>, mtu: u32) -> Result<Option<u64>, InvalidParam> {
    match v {
        Some((bytes, flag)) if bytes < mtu as u64 => Err(InvalidParam::new(
            flag,
            format!("at least the MTU ({mtu} bytes), so that a full-sized packet can pass"),
            bytes,
        )),
        Some((bytes, _)) => Ok(Some(bytes)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(name: &str) -> RawLink {
        RawLink { name: name.into(), ..Default::default() }
    }

    #[test]
    fn rates_sizes_and_losses_parse_like_tc() {
        assert_eq!(parse_rate("100mbit"), Ok(RateSetting::BitsPerSecond(100_000_000)));
        assert_eq!(parse_rate("1.5Gbit"), Ok(RateSetting::BitsPerSecond(1_500_000_000)));
        assert_eq!(parse_rate("64kbit"), Ok(RateSetting::BitsPerSecond(64_000)));
        assert_eq!(parse_rate("unlimited"), Ok(RateSetting::Unlimited));
        assert!(parse_rate("0mbit").unwrap_err().contains("at least 1bit"));
        assert!(parse_rate("100").unwrap_err().contains("unit is required"));
        assert!(parse_rate("-5mbit").is_err());
        assert!(parse_rate("10mbps").is_err());
        assert_eq!(parse_bytes("64KiB"), Ok(65_536));
        assert_eq!(parse_bytes("1MB"), Ok(1_000_000));
        assert_eq!(parse_bytes("1500"), Ok(1500));
        assert!(parse_bytes("1.5").is_err());
        assert!(parse_bytes("-1").is_err());
        assert_eq!(parse_loss("0.01"), Ok(0.01));
        assert_eq!(parse_loss("2%"), Ok(0.02));
        assert!(parse_loss("1.5").unwrap_err().contains("[0, 1]"));
        assert!(parse_loss("-0.1").is_err());
        assert!(parse_loss("NaN").is_err());
    }

    #[test]
    fn a_direction_takes_its_own_value_then_the_shared_one() {
        let mut r = raw("t");
        r.both.delay = Some(Duration::from_millis(5));
        r.down.delay = Some(Duration::from_millis(7));
        r.both.rate = Some(RateSetting::BitsPerSecond(8_000_000));
        r.up.rate = Some(RateSetting::Unlimited);
        let c = LinkConfig::new(&r).unwrap();
        assert_eq!(c.up.delay, Duration::from_millis(5));
        assert_eq!(c.down.delay, Duration::from_millis(7));
        assert_eq!(c.up.rate, None);
        // Default queue: one bandwidth-delay product of the 12 ms round trip at 1 MB/s, 12 kB,
        // raised to the 64 KiB floor.
        assert_eq!(c.down.rate, Some(RateLimit { rate_bps: 8_000_000, queue_bytes: 65_536, burst_bytes: 1500 }));
        assert_eq!(c.mtu, 1500);
        assert_eq!(c.seed, DEFAULT_SEED);
        r.both.delay = Some(Duration::from_millis(50));
        r.down.delay = None;
        r.both.rate = Some(RateSetting::BitsPerSecond(100_000_000));
        // 100 Mbit/s x 100 ms = 1.25 MB.
        assert_eq!(LinkConfig::new(&r).unwrap().down.rate.unwrap().queue_bytes, 1_250_000);
    }

    #[test]
    fn impossible_values_are_refused_naming_the_flag() {
        let refused = |f: &dyn Fn(&mut RawLink)| {
            let mut r = raw("t");
            f(&mut r);
            LinkConfig::new(&r).unwrap_err()
        };
        let e = refused(&|r| r.mtu = Some(575));
        assert_eq!((e.param.as_str(), e.received.as_str()), ("mtu", "575"));
        assert_eq!(refused(&|r| r.mtu = Some(65_536)).param, "mtu");
        let e = refused(&|r| r.up.loss = Some(1.5));
        assert_eq!(e.param, "loss-up");
        assert!(e.allowed.contains("[0, 1]"), "{e}");
        assert_eq!(refused(&|r| r.both.rate = Some(RateSetting::BitsPerSecond(0))).param, "rate");
        assert_eq!(refused(&|r| r.down.delay = Some(Duration::from_secs(11))).param, "delay-down");
        let e = refused(&|r| {
            r.both.delay = Some(Duration::from_millis(1));
            r.both.jitter = Some(Duration::from_millis(2));
        });
        assert_eq!(e.param, "jitter");
        assert_eq!(refused(&|r| r.both.queue_bytes = Some(100_000)).param, "queue");
        let e = refused(&|r| {
            r.both.rate = Some(RateSetting::BitsPerSecond(1_000_000));
            r.up.queue_bytes = Some(1000);
        });
        assert_eq!((e.param.as_str(), e.received.as_str()), ("queue-up", "1000"));
        assert_eq!(refused(&|r| r.reorder = true).param, "reorder");
        assert_eq!(refused(&|r| r.seed = Some(3)).param, "seed");
        assert_eq!(refused(&|r| r.name = "Bad/Name".into()).param, "name");
        assert_eq!(refused(&|r| r.name = "-x".into()).param, "name");
        assert_eq!(refused(&|r| r.name = "x".repeat(33)).param, "name");
    }

    #[test]
    fn reorder_and_seed_apply_with_jitter_or_loss() {
        let mut r = raw("t");
        r.up.delay = Some(Duration::from_millis(4));
        r.up.jitter = Some(Duration::from_millis(4));
        r.reorder = true;
        r.seed = Some(9);
        let c = LinkConfig::new(&r).unwrap();
        assert!(c.up.reorder && c.down.reorder);
        assert_eq!(c.seed, 9);
        let mut r = raw("t");
        r.down.loss = Some(0.25);
        r.seed = Some(4);
        assert_eq!(LinkConfig::new(&r).unwrap().down.loss, 0.25);
    }
}
