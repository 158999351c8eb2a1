//! A link's parameters as one JSON object, the form the lab's experiment specs give them in
//! (`[network]`) and `archlab-engine link --params` reads: the keys are the flags' names with
//! `_` for `-` (`delay`, `delay_up`, `rate_down`, `mtu`, `reorder`, `seed`...), the values
//! the flags' text (`"5ms"`, `"100mbit"`, `"1%"`) or plain numbers. It is read into the same
//! [`RawLink`] the flags fill and checked by the same [`LinkConfig::new`], so a spec and the
//! command line accept exactly the same links; a refusal names the JSON key.

use crate::params::{parse_bytes, parse_loss, parse_rate, InvalidParam, LinkConfig, RawDirection, RawLink};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Every key of the object, in the order the documentation lists them.
pub const KEYS: [&str; 21] = [
    "mtu",
    "delay",
    "delay_up",
    "delay_down",
    "jitter",
    "jitter_up",
    "jitter_down",
    "rate",
    "rate_up",
    "rate_down",
    "queue",
    "queue_up",
    "queue_down",
    "burst",
    "burst_up",
    "burst_down",
    "loss",
    "loss_up",
    "loss_down",
    "reorder",
    "congestion",
];

/// The one key outside [`KEYS`]'s per-direction families.
pub const SEED_KEY: &str = "seed";

/// A duration parser (the lab's syntax belongs to the load generator, see [`crate::params`]).
pub type ParseDuration = fn(&str) -> Result<Duration, String>;

/// Read and check the object `doc` for link `name`; a refusal names the JSON key.
pub fn config_from_json(name: &str, doc: &str, parse_duration: ParseDuration) -> Result<LinkConfig, InvalidParam> {
    let raw = raw_from_json(name, doc, parse_duration)?;
    // LinkConfig names a flag (`delay-up`); here the parameter is the key (`delay_up`).
    LinkConfig::new(&raw).map_err(|e| InvalidParam { param: e.param.replace('-', "_"), ..e })
}

/// The values of `doc` as given, each parsed as its flag would be.
pub fn raw_from_json(name: &str, doc: &str, parse_duration: ParseDuration) -> Result<RawLink, InvalidParam> {
    let value: Value = serde_json::from_str(doc)
        .map_err(|e| InvalidParam::new("", "a JSON object of link parameters", format!("invalid JSON ({e})")))?;
    let Value::Object(map) = value else {
        return Err(InvalidParam::new("", "a JSON object of link parameters", value));
    };
    let mut raw = RawLink { name: name.to_string(), ..RawLink::default() };
    for (key, v) in &map {
        set(&mut raw, key, v, parse_duration)?;
    }
    Ok(raw)
}

fn set(raw: &mut RawLink, key: &str, v: &Value, parse_duration: ParseDuration) -> Result<(), InvalidParam> {
    let refuse = |allowed: &str| InvalidParam::new(key, allowed, v);
    match key {
        "mtu" => {
            raw.mtu =
                Some(v.as_u64().and_then(|m| u32::try_from(m).ok()).ok_or_else(|| refuse("bytes in 576..=65535"))?)
        }
        "reorder" => raw.reorder = v.as_bool().ok_or_else(|| refuse("true or false"))?,
        "congestion" => {
            raw.congestion =
                Some(v.as_str().ok_or_else(|| refuse("a TCP congestion control name such as cubic"))?.into())
        }
        SEED_KEY => raw.seed = Some(v.as_u64().ok_or_else(|| refuse("an integer in 0..=18446744073709551615"))?),
        _ => {
            let (stem, direction) = match key.rsplit_once('_') {
                Some((stem, "up")) => (stem, &mut raw.up),
                Some((stem, "down")) => (stem, &mut raw.down),
                _ => (key, &mut raw.both),
            };
            let text = text(v).ok_or_else(|| refuse("a string or a number"))?;
            let parsed = |r: Result<(), String>| {
                r.map_err(|e| match stem {
                    // The duration parser says what is wrong, not what a duration looks like.
                    "delay" | "jitter" => {
                        InvalidParam::new(key, format!("a duration such as 5ms ({})", allowed_of(&e)), v)
                    }
                    _ => InvalidParam::new(key, allowed_of(&e), v),
                })
            };
            set_direction(direction, stem, &text, parse_duration, parsed).unwrap_or_else(|| {
                Err(InvalidParam::new(key, format!("a key among {}, seed", KEYS.join(", ")), key))
            })?;
        }
    }
    Ok(())
}

/// Set field `stem` of one direction from its text; None when `stem` names no field.
fn set_direction(
    d: &mut RawDirection,
    stem: &str,
    text: &str,
    parse_duration: ParseDuration,
    parsed: impl Fn(Result<(), String>) -> Result<(), InvalidParam>,
) -> Option<Result<(), InvalidParam>> {
    let result = match stem {
        "delay" => parse_duration(text).map(|x| d.delay = Some(x)),
        "jitter" => parse_duration(text).map(|x| d.jitter = Some(x)),
        "rate" => parse_rate(text).map(|x| d.rate = Some(x)),
        "queue" => parse_bytes(text).map(|x| d.queue_bytes = Some(x)),
        "burst" => parse_bytes(text).map(|x| d.burst_bytes = Some(x)),
        "loss" => parse_loss(text).map(|x| d.loss = Some(x)),
        _ => return None,
    };
    Some(parsed(result))
}

/// What a parser's message says is allowed: its text without "expected" and the value received
/// (which the refusal gives on its own), whether the message quotes it last or first.
fn allowed_of(message: &str) -> &str {
    let m = message.strip_prefix("expected ").unwrap_or(message);
    let m = m.strip_prefix('"').and_then(|rest| rest.split_once("\": ")).map_or(m, |(_, after)| after);
    m.rsplit_once(", got ").map_or(m, |(allowed, _)| allowed)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// What a checked link applies, as JSON: `mtu`, `up` and `down` (as in the `ready` line),
/// `seed` and `congestion` (null: the host's default).
pub fn config_json(config: &LinkConfig) -> Value {
    let mut m = Map::new();
    m.insert("mtu".into(), json!(config.mtu));
    m.insert("up".into(), json!(config.up));
    m.insert("down".into(), json!(config.down));
    m.insert("seed".into(), json!(config.seed));
    m.insert("congestion".into(), json!(config.congestion));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seconds(s: &str) -> Result<Duration, String> {
        let ms = s.strip_suffix("ms").ok_or_else(|| format!("no ms in {s:?}"))?;
        ms.parse::<f64>().map(|x| Duration::from_secs_f64(x / 1e3)).map_err(|e| e.to_string())
    }

    #[test]
    fn keys_read_like_the_flags_and_directions_override_both() {
        let c = config_from_json(
            "t",
            r#"{"delay":"5ms","delay_down":"7ms","rate_up":"10mbit","loss":0.01,"mtu":9000}"#,
            seconds,
        )
        .unwrap();
        assert_eq!(c.mtu, 9000);
        assert_eq!(c.up.delay, Duration::from_millis(5));
        assert_eq!(c.down.delay, Duration::from_millis(7));
        assert_eq!(c.up.rate.unwrap().rate_bps, 10_000_000);
        assert!(c.down.rate.is_none());
        assert_eq!(c.up.loss, 0.01);
        assert_eq!(c.down.loss, 0.01);
    }

    #[test]
    fn refusals_name_the_key() {
        let err = |doc: &str| config_from_json("t", doc, seconds).unwrap_err();
        assert_eq!(err(r#"{"mtu":575}"#).param, "mtu");
        let loss = err(r#"{"loss_up":1.5}"#);
        assert_eq!((loss.param.as_str(), loss.received.as_str()), ("loss_up", "1.5"));
        assert!(loss.allowed.starts_with("a probability in [0, 1]"), "{loss}");
        assert_eq!(err(r#"{"rate":"0mbit"}"#).param, "rate");
        assert_eq!(err(r#"{"delay":"5ms","jitter_down":"6ms"}"#).param, "jitter_down");
        assert_eq!(err(r#"{"delay":"5"}"#).param, "delay");
        assert_eq!(allowed_of(r#""-5ms": a duration must be >= 0"#), "a duration must be >= 0");
        assert_eq!(err(r#"{"queue_up":"64KiB"}"#).param, "queue_up");
        assert_eq!(err(r#"{"seed":3}"#).param, "seed");
        assert_eq!(err(r#"{"congestion":"Cubic!"}"#).param, "congestion");
        assert_eq!(
            config_from_json("t", r#"{"congestion":"cubic"}"#, seconds).unwrap().congestion.as_deref(),
            Some("cubic")
        );
        let unknown = err(r#"{"delay_sideways":"1ms"}"#);
        assert_eq!(unknown.param, "delay_sideways");
        assert!(unknown.allowed.contains("delay_up"), "{unknown}");
        assert_eq!(err(r#"{"delay":true}"#).param, "delay");
    }

    #[test]
    fn nothing_given_is_a_plain_1500_byte_path() {
        let c = config_from_json("t", "{}", seconds).unwrap();
        assert_eq!(c.mtu, 1500);
        assert_eq!(c.up, crate::params::DirectionParams::TRANSPARENT);
        assert_eq!(config_json(&c)["down"]["delay_us"], json!(0.0));
    }
}
