use crate::{Choice, Flag, Int, NoFlag, PowerOfTwo, Text};
use clap::{Args, Command, FromArgMatches};
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colour {
    Red,
    Blue,
}

impl Colour {
    const ALL: [Colour; 2] = [Colour::Red, Colour::Blue];
    fn name(self) -> &'static str {
        match self {
            Colour::Red => "red",
            Colour::Blue => "blue",
        }
    }
}

crate::option_set! {
    /// A set exercising every kind.
    pub struct Sample names SampleOption {
        /// Worker threads.
        threads: Option<usize> = None, Int::<usize>::new(1, 64), named Threads;
        /// Slots of a ring,
        /// a power of two.
        slots: Option<usize> = None, PowerOfTwo { min: 2, max: 1024 }, named Slots;
        /// Colour of the thing.
        colour: Colour = Colour::Red, Choice { all: &Colour::ALL, name: Colour::name };
        /// Where to go.
        target: Option<std::net::SocketAddr> = None, Text::<std::net::SocketAddr>::of("HOST:PORT", "ADDR");
        /// Spin instead of sleeping.
        busy: bool = false, Flag;
        /// Delay small writes (on unless --no-delay).
        delay: bool = true, NoFlag;
        /// Body limit, kept in a field of another name.
        limit as max_bytes: u32 = 100, Int::<u32>::new(0, 1000);
        /// Never compiled.
        #[cfg(any())]
        ghost: Option<u32> = None, Int::<u32>::new(0, 1);
    }
    runtime {
        /// Not an option.
        handle: Option<u8> = None;
    }
}

fn command() -> Command {
    Sample::augment_args(Command::new("t").no_binary_name(true))
}

fn flags(args: &[&str]) -> Result<Sample, String> {
    let m = command().try_get_matches_from(args).map_err(|e| e.to_string())?;
    Sample::from_arg_matches(&m).map_err(|e| e.to_string())
}

#[test]
fn names_keys_and_defaults_come_from_the_declaration() {
    assert_eq!(Sample::names(), ["threads", "slots", "colour", "target", "busy", "delay", "max_bytes"]);
    let d = Sample::default();
    assert_eq!((d.threads, d.colour, d.busy, d.delay, d.limit, d.handle), (None, Colour::Red, false, true, 100, None));
    assert_eq!(d.to_json(), json!({"colour": "red", "busy": false, "delay": true, "max_bytes": 100}));
    let schema = Sample::schema();
    let slots = schema.iter().find(|o| o.name == "slots").unwrap();
    assert_eq!((slots.flag.as_str(), slots.doc.as_str()), ("--slots", "Slots of a ring, a power of two."));
    assert_eq!(slots.allowed, "a power of two in 2..=1024");
    assert_eq!(slots.default, None);
    let delay = schema.iter().find(|o| o.name == "delay").unwrap();
    assert_eq!((delay.flag.as_str(), delay.default.clone()), ("--no-delay", Some(json!(true))));
    assert_eq!(SampleOption::ALL, [SampleOption::Threads, SampleOption::Slots]);
    assert_eq!(SampleOption::Slots.as_str(), "slots");
}

#[test]
fn json_and_flags_read_the_same_values() {
    let from_flags = flags(&[
        "--threads",
        "4",
        "--slots",
        "16",
        "--colour",
        "blue",
        "--target",
        "127.0.0.1:80",
        "--busy",
        "--no-delay",
        "--max-bytes",
        "7",
    ])
    .unwrap();
    let from_json = Sample::from_json(&from_flags.to_json().to_string()).unwrap();
    assert_eq!(from_json.to_json(), from_flags.to_json());
    assert_eq!(
        from_json.to_json(),
        json!({"threads": 4, "slots": 16, "colour": "blue", "target": "127.0.0.1:80", "busy": true, "delay": false, "max_bytes": 7})
    );
    assert!(from_json.is_set(SampleOption::Threads));
    assert_eq!(from_json.value_of(SampleOption::Slots), Some(json!(16)));
}

#[test]
fn both_ways_refuse_a_value_with_the_option_and_the_allowed_values() {
    let e = Sample::from_json(r#"{"slots": 1000}"#).unwrap_err();
    assert_eq!(e.to_string(), "slots: expected a power of two in 2..=1024, got 1000");
    let e = flags(&["--slots", "1000"]).unwrap_err();
    assert!(e.contains("'--slots <N>': expected a power of two in 2..=1024, got \"1000\""), "{e}");
    // A negative number is a value of the option, not another flag.
    let e = flags(&["--threads", "-1"]).unwrap_err();
    assert!(e.contains("'--threads <N>': expected an integer in 1..=64, got \"-1\""), "{e}");
    let e = Sample::from_json(r#"{"colour": "green"}"#).unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.allowed.as_str(), e.received.as_str()),
        ("colour", "one of red, blue", "\"green\"")
    );
    let e = Sample::from_json(r#"{"threads": "4"}"#).unwrap_err();
    assert_eq!(e.field, "threads");
    let e = Sample::from_json(r#"{"thread": 4}"#).unwrap_err();
    assert_eq!(
        e.to_string(),
        "thread: expected an option of threads, slots, colour, target, busy, delay, max_bytes, got \"thread\""
    );
    assert_eq!(Sample::from_json(r#"{"ghost": 1}"#).unwrap_err().field, "ghost");
    let e = Sample::from_json("[1]").unwrap_err();
    assert_eq!(e.to_string(), "expected a JSON object of options, got [1]");
    assert!(Sample::from_json("{").unwrap_err().received.starts_with("invalid JSON"));
    // null unsets an optional option and is refused for the others.
    assert_eq!(Sample::from_json(r#"{"threads": null}"#).unwrap().threads, None);
    assert_eq!(Sample::from_json(r#"{"busy": null}"#).unwrap_err().field, "busy");
}

#[test]
fn values_built_in_code_are_checked() {
    let s = Sample { threads: Some(65), ..Default::default() };
    assert_eq!(s.check_values().unwrap_err().to_string(), "threads: expected an integer in 1..=64, got 65");
    assert!(Sample { slots: Some(64), ..Default::default() }.check_values().is_ok());
}

#[test]
fn flags_override_a_json_base_and_defaults_do_not() {
    let mut s = Sample::from_json(r#"{"threads": 8, "slots": 4, "busy": true, "delay": false}"#).unwrap();
    let m = command().try_get_matches_from(["--slots", "8"]).unwrap();
    s.update_from_arg_matches(&m).unwrap();
    assert_eq!((s.threads, s.slots, s.busy, s.delay), (Some(8), Some(8), true, false));
}

#[test]
fn help_shows_docs_and_defaults() {
    let help = command().render_help().to_string();
    assert!(help.contains("--max-bytes <N>"), "{help}");
    assert!(help.contains("Body limit, kept in a field of another name [default: 100]"), "{help}");
    assert!(help.contains("--no-delay"), "{help}");
}
