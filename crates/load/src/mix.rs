//! Request mixes: a run that carries several HTTP request classes, each a path with a weight,
//! like JMeter's throughput controller (seed 001 Figs. 16-17: 2 % heavy 100 KB and 98 % light
//! 0.1 KB requests in one run). The class of every request is drawn when it is sent, from the
//! lab's seeded generator: one stream per load thread, keyed by the run's seed, so that a seed
//! names the same sequence of classes on each thread whatever the timing of the server (the
//! i-th request a thread sends gets the i-th draw of its stream). The requests of each class
//! are built once before the run (`run/mod.rs`); drawing is one uniform number and a scan of a
//! few cumulative weights, so a mix adds no allocation on the request path.
//!
//! Syntax (the `mix` parameter, the same on the command line, in JSON and in a spec):
//! `PATH:WEIGHT,PATH:WEIGHT,...`, e.g. `/response?size=102400:2,/response?size=100:98`; a
//! weight is a number >= 0 (shares are the weights over their total, which must be > 0), the
//! weight follows the last ':' of an item, so a path may contain ':' but not ','. JSON also
//! takes a list of `{"path": ..., "weight": ...}` objects.

use crate::dist::{stream, Rng};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;

/// Most classes in one mix: a class index is one byte of a raw record (`records.rs`).
pub const MAX_CLASSES: usize = 255;

/// One request class of a mix.
#[derive(Clone, Debug, PartialEq)]
pub struct MixClass {
    /// Request target, path and query.
    pub path: String,
    /// Relative weight, >= 0.
    pub weight: f64,
}

/// The request classes of a run, in the order given (a class's index is its position).
#[derive(Clone, Debug, PartialEq)]
pub struct Mix {
    classes: Vec<MixClass>,
}

/// What a mix must look like, as said in a refusal.
pub const MIX_SYNTAX: &str = "comma-separated PATH:WEIGHT classes (PATH starting with '/', without spaces or ','; \
     WEIGHT a number >= 0, total > 0; at most 255 classes, paths distinct), \
     e.g. /response?size=102400:2,/response?size=100:98";

impl Mix {
    /// A mix of `classes`, checked: at least one, weights finite and >= 0 with a total > 0,
    /// paths that can go in a request line, distinct.
    pub fn new(classes: Vec<MixClass>) -> Result<Mix, String> {
        if classes.is_empty() {
            return Err("no class".into());
        }
        if classes.len() > MAX_CLASSES {
            return Err(format!("{} classes (at most {MAX_CLASSES})", classes.len()));
        }
        for (i, c) in classes.iter().enumerate() {
            if !c.path.starts_with('/') || !c.path.bytes().all(|b| b.is_ascii_graphic()) || c.path.contains(',') {
                return Err(format!("class {} has path {:?}, not a request target starting with '/'", i + 1, c.path));
            }
            if !(c.weight.is_finite() && c.weight >= 0.0) {
                return Err(format!("class {} ({}) has weight {}, not a number >= 0", i + 1, c.path, c.weight));
            }
            if classes[..i].iter().any(|o| o.path == c.path) {
                return Err(format!("path {} appears twice", c.path));
            }
        }
        if classes.iter().map(|c| c.weight).sum::<f64>() <= 0.0 {
            return Err("the weights add up to 0".into());
        }
        Ok(Mix { classes })
    }

    pub fn classes(&self) -> &[MixClass] {
        &self.classes
    }

    /// Share of class `i`: its weight over the total.
    pub fn share(&self, i: usize) -> f64 {
        self.classes[i].weight / self.classes.iter().map(|c| c.weight).sum::<f64>()
    }

    /// The mix from its JSON form: the text syntax, or a list of `{path, weight}` objects.
    pub fn from_json(v: &Value) -> Result<Mix, String> {
        match v {
            Value::String(s) => s.parse(),
            Value::Array(items) => {
                let classes = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        let path = item.get("path").and_then(Value::as_str);
                        let weight = item.get("weight").and_then(Value::as_f64);
                        let extra = item.as_object().is_some_and(|o| o.keys().any(|k| k != "path" && k != "weight"));
                        match (path, weight, extra) {
                            (Some(path), Some(weight), false) => Ok(MixClass { path: path.to_string(), weight }),
                            _ => Err(format!("item {} is {item}, not {{\"path\": PATH, \"weight\": NUMBER}}", i + 1)),
                        }
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                Mix::new(classes)
            }
            _ => Err(String::new()),
        }
    }
}

impl FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Mix, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("no class".into());
        }
        let classes = s
            .split(',')
            .enumerate()
            .map(|(i, item)| {
                let item = item.trim();
                let (path, weight) =
                    item.rsplit_once(':').ok_or_else(|| format!("class {} is {item:?}, not PATH:WEIGHT", i + 1))?;
                let weight: f64 = weight
                    .trim()
                    .parse()
                    .map_err(|_| format!("class {} has weight {:?}, not a number", i + 1, weight.trim()))?;
                Ok(MixClass { path: path.trim().to_string(), weight })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Mix::new(classes)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.classes.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{}", c.path, c.weight)?;
        }
        Ok(())
    }
}

/// The class draws of one load thread: its own stream of the run's seed.
pub(crate) struct ClassDraw {
    rng: Rng,
    /// Cumulative shares, the last one 1.
    cumulative: Vec<f64>,
}

impl ClassDraw {
    /// The draws of load thread `thread` of a run seeded `seed`.
    pub(crate) fn new(mix: &Mix, seed: u64, thread: usize) -> ClassDraw {
        let total: f64 = mix.classes.iter().map(|c| c.weight).sum();
        let mut acc = 0.0;
        let mut cumulative: Vec<f64> = mix
            .classes
            .iter()
            .map(|c| {
                acc += c.weight;
                acc / total
            })
            .collect();
        // Rounding must not leave a gap at the top: the last class with weight takes it.
        let last = mix.classes.iter().rposition(|c| c.weight > 0.0).expect("total > 0");
        for c in &mut cumulative[last..] {
            *c = f64::INFINITY;
        }
        ClassDraw { rng: stream(seed, 0x6d69_7800_0000_0000 | thread as u64), cumulative }
    }

    /// The class of the next request.
    #[inline]
    pub(crate) fn next(&mut self) -> u8 {
        let u = self.rng.uniform();
        // A class of weight 0 has the same bound as the one before it, so `u < bound` never
        // picks it.
        self.cumulative.iter().position(|&bound| u < bound).unwrap_or(self.cumulative.len() - 1) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_forms_read_the_same_and_write_back() {
        let m: Mix = "/response?size=102400:2, /response?size=100:98".parse().unwrap();
        assert_eq!(m.classes().len(), 2);
        assert_eq!(m.classes()[0], MixClass { path: "/response?size=102400".into(), weight: 2.0 });
        assert_eq!(m.to_string(), "/response?size=102400:2,/response?size=100:98");
        assert_eq!(m.to_string().parse::<Mix>().unwrap(), m);
        let j = serde_json::json!([
            {"path": "/response?size=102400", "weight": 2},
            {"path": "/response?size=100", "weight": 98}
        ]);
        assert_eq!(Mix::from_json(&j).unwrap(), m);
        assert!((m.share(0) - 0.02).abs() < 1e-12);
        // A path with ':' keeps it: the weight is after the last one.
        assert_eq!("/a:b:3".parse::<Mix>().unwrap().classes()[0].path, "/a:b");
    }

    #[test]
    fn bad_mixes_are_refused_with_the_reason() {
        for (bad, why) in [
            ("", "no class"),
            ("/a", "not PATH:WEIGHT"),
            ("/a:x", "not a number"),
            ("/a:-1,/b:2", "not a number >= 0"),
            ("/a:0,/b:0", "add up to 0"),
            ("a:1", "starting with '/'"),
            ("/a:1,/a:2", "twice"),
            ("/a:NaN", "not a number >= 0"),
            ("/a:inf", "not a number >= 0"),
        ] {
            let e = bad.parse::<Mix>().unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(Mix::from_json(&serde_json::json!([{"path": "/a"}])).is_err());
        assert!(Mix::from_json(&serde_json::json!([{"path": "/a", "weight": 1, "x": 2}])).is_err());
        assert!(Mix::from_json(&serde_json::json!(3)).is_err());
        let many: Vec<String> = (0..256).map(|i| format!("/p{i}:1")).collect();
        assert!(many.join(",").parse::<Mix>().unwrap_err().contains("at most 255"));
    }

    #[test]
    fn draws_follow_the_seed_and_never_pick_a_class_of_weight_zero() {
        let m: Mix = "/a:0,/b:1,/c:0,/d:3,/e:0".parse().unwrap();
        let draw = |seed, thread| {
            let mut d = ClassDraw::new(&m, seed, thread);
            (0..10_000).map(|_| d.next()).collect::<Vec<u8>>()
        };
        let a = draw(7, 0);
        assert_eq!(a, draw(7, 0), "the same seed and thread give the same classes");
        assert_ne!(a, draw(8, 0), "another seed gives other classes");
        assert_ne!(a, draw(7, 1), "another thread has its own stream");
        assert!(a.iter().all(|&c| c == 1 || c == 3), "only classes with weight are drawn");
        // Share of /d is 3/4; n = 10 000 draws: sd = sqrt(n p (1-p)) = 43.3; 5 sd = 217 (a
        // false failure has probability < 1e-6 for a correct draw).
        let d = a.iter().filter(|&&c| c == 3).count() as f64;
        assert!((d - 7500.0).abs() < 217.0, "{d}");
    }
}
