//! [`option_set!`](crate::option_set): the one declaration of an option set.

/// Declare an option set: a struct with one public field per option, its `Default`, its
/// command-line flags (`clap::Args`), its JSON form, checks and schema.
///
/// ```ignore
/// archlab_options::option_set! {
///     /// What the set is for.
///     pub struct PoolOptions names PoolOption {
///         /// Worker threads.
///         threads: Option<usize> = None, Int::<usize>::new(1, 64), named Threads;
///         /// Largest body, in bytes (`--max-body-bytes`; the field keeps the name `limit`).
///         limit as max_body_bytes: usize = 1024, Int::<usize>::new(0, 1 << 20);
///         /// Only in builds with the feature.
///         #[cfg(feature = "x")]
///         extra: Option<u32> = None, Int::<u32>::new(1, 9);
///     }
///     runtime {
///         /// Not an option: set by the program, skipped by flags and JSON.
///         handle: Option<u8> = None;
///     }
/// }
/// ```
///
/// Each option line is `FIELD [as KEY]: TYPE = DEFAULT, KIND [, named VARIANT];`. The key (the
/// field's name unless `as KEY`) is the JSON key and, with `-` for `_`, the flag. A field of type
/// `Option<V>` is unset until given; any other type starts at its default. With `names ENUM`,
/// the options marked `named` also get a variant of a generated enum `ENUM` (with `ALL` and
/// `as_str`), and the set gets `is_set(ENUM)` and `value_of(ENUM)`; a named option cannot be
/// behind `#[cfg]`. Flags given on the command line update a set read from JSON
/// (`update_from_arg_matches`), so a file can be the base and flags override it.
#[macro_export]
macro_rules! option_set {
    (@set [$($meta:tt)*] $vis:vis $Name:ident {
        $(
            $(#[doc = $doc:literal])*
            $(#[cfg($cfg:meta)])?
            $field:ident $(as $key:ident)? : $ty:ty = $default:expr, $kind:expr $(, named $Variant:ident)? ;
        )*
    } $(runtime {
        $( $(#[doc = $rdoc:literal])* $rfield:ident : $rty:ty = $rdefault:expr ; )*
    })?) => {
        $($meta)*
        #[derive(Clone, Debug)]
        $vis struct $Name {
            $( $(#[doc = $doc])* $(#[cfg($cfg)])? pub $field: $ty, )*
            $($( $(#[doc = $rdoc])* pub $rfield: $rty, )*)?
        }

        impl Default for $Name {
            fn default() -> Self {
                $Name {
                    $( $(#[cfg($cfg)])? $field: $default, )*
                    $($( $rfield: $rdefault, )*)?
                }
            }
        }

        impl $Name {
            /// The options' names (JSON keys), in declaration order.
            #[allow(clippy::vec_init_then_push)] // one push per option, some behind #[cfg]
            pub fn names() -> Vec<&'static str> {
                let mut names = Vec::new();
                $( $(#[cfg($cfg)])? names.push($crate::__option_key!($field $(as $key)?)); )*
                names
            }

            /// Name, flag, documentation, allowed values and default of every option.
            #[allow(clippy::vec_init_then_push)]
            pub fn schema() -> Vec<$crate::OptionInfo> {
                let defaults = Self::default();
                let mut out = Vec::new();
                $(
                    $(#[cfg($cfg)])?
                    out.push($crate::info::<_, $ty>(
                        &$kind,
                        $crate::__option_key!($field $(as $key)?),
                        concat!($($doc, "\n",)* ""),
                        &defaults.$field,
                    ));
                )*
                out
            }

            /// The set from the text of a JSON object; options left out keep their defaults.
            pub fn from_json(text: &str) -> Result<Self, $crate::OptionError> {
                Self::from_json_value(&$crate::parse_document(text)?)
            }

            /// The set from a JSON object; options left out keep their defaults.
            pub fn from_json_value(v: &$crate::serde_json::Value) -> Result<Self, $crate::OptionError> {
                let mut set = Self::default();
                set.update_from_json(v)?;
                Ok(set)
            }

            /// Set the options present in the JSON object `v` (`null` unsets an optional one).
            pub fn update_from_json(&mut self, v: &$crate::serde_json::Value) -> Result<(), $crate::OptionError> {
                for (key, value) in $crate::object(v)? {
                    match key.as_str() {
                        $(
                            $(#[cfg($cfg)])?
                            $crate::__option_key!($field $(as $key)?) => {
                                self.$field = $crate::read_json::<_, $ty>(&$kind, key, value)?;
                            }
                        )*
                        other => return Err($crate::unknown(other, &Self::names())),
                    }
                }
                Ok(())
            }

            /// The JSON object of the options that are set, keys in sorted order.
            pub fn to_json(&self) -> $crate::serde_json::Value {
                let mut map = $crate::serde_json::Map::new();
                $(
                    $(#[cfg($cfg)])?
                    if let Some(v) = $crate::write_json::<_, $ty>(&$kind, &self.$field) {
                        map.insert($crate::__option_key!($field $(as $key)?).to_string(), v);
                    }
                )*
                $crate::serde_json::Value::Object(map)
            }

            /// Refuse a value out of its option's range (values built in code are not checked
            /// as they are written; flags and JSON are checked as they are read).
            pub fn check_values(&self) -> Result<(), $crate::OptionError> {
                $(
                    $(#[cfg($cfg)])?
                    $crate::check_field::<_, $ty>(&$kind, $crate::__option_key!($field $(as $key)?), &self.$field)?;
                )*
                Ok(())
            }
        }

        impl $crate::clap::Args for $Name {
            fn augment_args(cmd: $crate::clap::Command) -> $crate::clap::Command {
                let defaults = Self::default();
                let mut cmd = cmd;
                $(
                    $(#[cfg($cfg)])?
                    {
                        let default = $crate::write_json::<_, $ty>(&$kind, &defaults.$field);
                        let key = $crate::__option_key!($field $(as $key)?);
                        cmd = cmd.arg($crate::arg(&$kind, key, concat!($($doc, "\n",)* ""), default));
                    }
                )*
                cmd
            }
            fn augment_args_for_update(cmd: $crate::clap::Command) -> $crate::clap::Command {
                Self::augment_args(cmd)
            }
        }

        impl $crate::clap::FromArgMatches for $Name {
            fn from_arg_matches(m: &$crate::clap::ArgMatches) -> Result<Self, $crate::clap::Error> {
                let mut set = Self::default();
                set.update_from_arg_matches(m)?;
                Ok(set)
            }
            fn update_from_arg_matches(&mut self, m: &$crate::clap::ArgMatches) -> Result<(), $crate::clap::Error> {
                $(
                    $(#[cfg($cfg)])?
                    if let Some(v) = $crate::given::<_, $ty>(&$kind, m, $crate::__option_key!($field $(as $key)?)) {
                        self.$field = v;
                    }
                )*
                Ok(())
            }
        }
    };

    (@names $Name:ident $Names:ident { $( [$field:ident, $keyname:expr, $ty:ty, $kind:expr, $($Variant:ident)?] )* }) => {
        /// The options of the set that have a name of their own (see [`option_set!`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $Names {
            $( $( $Variant, )? )*
        }

        impl $Names {
            pub const ALL: &'static [$Names] = &[ $( $( $Names::$Variant, )? )* ];

            /// The option's key, as in JSON and specs.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $( $Names::$Variant => $keyname, )? )*
                }
            }
        }

        impl std::fmt::Display for $Names {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $Name {
            /// Whether the named option is set (given, or set to a value in code).
            pub fn is_set(&self, name: $Names) -> bool {
                self.value_of(name).is_some()
            }

            /// The named option's value as JSON, if set.
            pub fn value_of(&self, name: $Names) -> Option<$crate::serde_json::Value> {
                match name {
                    $( $( $Names::$Variant => $crate::write_json::<_, $ty>(&$kind, &self.$field), )? )*
                }
            }
        }
    };

    (
        $(#[$meta:meta])* $vis:vis struct $Name:ident names $Names:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[cfg($cfg:meta)])?
                $field:ident $(as $key:ident)? : $ty:ty = $default:expr, $kind:expr $(, named $Variant:ident)? ;
            )*
        } $($rest:tt)*
    ) => {
        $crate::option_set!(@set [$(#[$meta])*] $vis $Name {
            $(
                $(#[doc = $doc])*
                $(#[cfg($cfg)])?
                $field $(as $key)? : $ty = $default, $kind $(, named $Variant)? ;
            )*
        } $($rest)*);
        $crate::option_set!(@names $Name $Names {
            $( [$field, $crate::__option_key!($field $(as $key)?), $ty, $kind, $($Variant)?] )*
        });
    };

    ($(#[$meta:meta])* $vis:vis struct $Name:ident { $($body:tt)* } $($rest:tt)*) => {
        $crate::option_set!(@set [$(#[$meta])*] $vis $Name { $($body)* } $($rest)*);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __option_key {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident as $key:ident) => {
        stringify!($key)
    };
}
