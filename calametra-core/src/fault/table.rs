//! The machinery of the fault primitives' table: `primitives!` turns the table in
//! `fault.rs` (one entry a primitive) into [`Fault`](super::Fault), [`FaultKind`](super::FaultKind)
//! and every method that answers per primitive (name, parse, display, where it applies, what
//! it does, what exploration injects), and into the `fault_kind!` macro through which
//! `#[calametra::scenario(faults = [..])]` names a primitive so the compiler checks it.
//!
//! Nothing here names a primitive: what a primitive is and does is its entry's, and only its
//! entry's. The helpers for parsing a primitive's arguments ([`Args`]) live here too.

/// The arguments of a fault written in its trial-name form (`short(4)`, `corrupt(0,0xff)`),
/// as a primitive's `parse` sees them: the whole text (for error messages) and what stood
/// between the parentheses, if anything.
pub(crate) struct Args<'a> {
    /// The whole text, `corrupt(1,300)`.
    pub(crate) text: &'a str,
    /// What stood between the parentheses, `1,300`; `None` for a bare name.
    pub(crate) inner: Option<&'a str>,
}

impl<'a> Args<'a> {
    /// `fault` when no arguments were written, else the "not a fault" error.
    pub(crate) fn none(&self, fault: super::Fault) -> Result<super::Fault, String> {
        match self.inner {
            None => Ok(fault),
            Some(_) => Err(super::FaultKind::not_a_fault(self.text)),
        }
    }

    /// The `n` comma-separated arguments; the "not a fault" error for a bare name, `usage`
    /// (what the form is) when their number is wrong.
    pub(crate) fn list<const N: usize>(&self, usage: &str) -> Result<[&'a str; N], String> {
        let inner = self
            .inner
            .ok_or_else(|| super::FaultKind::not_a_fault(self.text))?;
        let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
        <[&str; N]>::try_from(parts)
            .map_err(|_| format!("`{}`: expected {usage}", self.text.trim()))
    }

    /// `a` as an integer (decimal, or hex after `0x`) that fits `T`; `too_large` says what
    /// does not fit.
    /// The two arguments of a one-byte primitive (`corrupt(offset,xor)`): an offset, and a
    /// mask that fits a byte.
    pub(crate) fn byte_xor(&self, usage: &str) -> Result<(u32, u8), String> {
        let [o, x] = self.list::<2>(usage)?;
        Ok((
            self.int(o, "offset too large")?,
            self.int(x, "xor must fit a byte")?,
        ))
    }

    pub(crate) fn int<T: TryFrom<u64>>(&self, a: &str, too_large: &str) -> Result<T, String> {
        let s = self.text.trim();
        let a = a.trim();
        let r = match a.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => a.parse(),
        };
        let v = r.map_err(|_| format!("`{s}`: `{a}` is not a number"))?;
        T::try_from(v).map_err(|_| format!("`{s}`: {too_large}"))
    }
}

/// Declares the fault primitives: see the table in `fault.rs` for the entries' fields. The
/// first argument is a `$` token, so that the `fault_kind!` macro made here can have
/// variables of its own.
macro_rules! primitives {
    (($d:tt) $(
        $(#[$attr:meta])*
        $V:ident $(($($t:ident: $tt:ty),+))? $({$($(#[$fattr:meta])* $s:ident: $st:ty),+ $(,)?})? => {
            name: $name:ident,
            form: $form:literal,
            json: $json:literal,
            in_all: $in_all:literal,
            payload: $payload:tt,
            parse($args:ident): $parse:expr,
            show($f:ident): $show:expr,
            arrival: $arrival:expr,
            latency: $latency:expr,
            bends: $bends:literal,
            bend($data:ident): $bend:expr,
            at_transition: $at_tr:literal => $transition:expr,
            explore($len:ident $(, $epacket:ident)?): $explore:expr,
            $(draw($dlen:ident, $below:ident $(, $dpacket:ident)?): $draw:expr,)?
            $(at_reply: $at_reply:literal,)?
            mutant $(($mdir:ident))?: $mutant:expr $(,)?
        }
    )*) => {
        /// A fault primitive: one variant per entry of the table in `fault.rs`.
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case", deny_unknown_fields)]
        pub enum Fault {
            $(
                $(#[$attr])*
                $V $(($($tt),+))? $({$($(#[$fattr])* $s: $st),+})?,
            )*
        }

        /// The kind of a fault, without its parameters: what `faults = [..]` lists. Serialized
        /// by its name (`"stall"`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum FaultKind {
            $(
                #[doc = concat!("[`Fault::", stringify!($V), "`]: `", stringify!($name), "`.")]
                $V,
            )*
        }

        impl FaultKind {
            /// How many primitives there are.
            pub const COUNT: usize = [$(FaultKind::$V),*].len();

            /// Every kind, in table order: the order trials are generated, candidates are
            /// listed and a swarm lists its primitives.
            pub const ALL: [FaultKind; FaultKind::COUNT] = [$(FaultKind::$V),*];

            /// Parses a kind's name (`stall`, `short`, ...).
            pub fn parse(s: &str) -> Option<FaultKind> {
                match s {
                    $(stringify!($name) => Some(FaultKind::$V),)*
                    _ => None,
                }
            }

            /// The kind's name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(FaultKind::$V => stringify!($name),)*
                }
            }

            /// Its trial-name form with parameters named: `short(n)`, `corrupt(offset,xor)`.
            pub fn form(self) -> &'static str {
                match self {
                    $(FaultKind::$V => $form,)*
                }
            }

            /// Its form in a fault schedule file: `"stall"`, `{"short":n}`.
            pub fn json_form(self) -> &'static str {
                match self {
                    $(FaultKind::$V => $json,)*
                }
            }

            /// Whether `faults = all` and `faults = transport` explore it. A primitive added
            /// after seeds were pinned is not (it is explored where a scenario names it), so
            /// that adding it changes no existing seed's run.
            pub const fn in_all(self) -> bool {
                match self {
                    $(FaultKind::$V => $in_all,)*
                }
            }

            /// The payloads it means something at, as its entry declares (`payload: any`,
            /// `in` or `out`): `Some(dir)` for a primitive only meaningful at transfers whose
            /// payload goes `dir`, `None` for one meaningful at any transfer.
            pub const fn payload(self) -> Option<Dir> {
                match self {
                    $(FaultKind::$V => $crate::fault::table::payload!($payload),)*
                }
            }

            /// Whether it means something at a transfer whose payload goes `dir`
            /// ([`FaultKind::payload`]).
            pub const fn at_payload(self, dir: Dir) -> bool {
                match self.payload() {
                    None => true,
                    Some(d) => d as u8 == dir as u8,
                }
            }

            /// Whether it means something at a transition site (every primitive does at a
            /// transfer).
            pub const fn at_transition(self) -> bool {
                match self {
                    $(FaultKind::$V => $at_tr,)*
                }
            }
        }

        impl Fault {
            /// The fault's kind.
            pub fn kind(&self) -> FaultKind {
                match self {
                    $(Fault::$V { .. } => FaultKind::$V,)*
                }
            }

            /// What this fault does when its transfer first reaches the device: `stall`,
            /// `timeout` and `disconnect` stop it there; the others let it through.
            #[allow(unused_variables)]
            pub fn on_arrival(&self) -> Arrival {
                match *self {
                    $(Fault::$V $(($($t),+))? $({$($s),+})? => $arrival,)*
                }
            }

            /// The extra time its transfer takes to cross the bus (`delay`; 0 for the
            /// others).
            #[allow(unused_variables)]
            pub fn latency(&self) -> u64 {
                match *self {
                    $(Fault::$V $(($($t),+))? $({$($s),+})? => $latency,)*
                }
            }

            /// Whether it changes the bytes that cross (`short`, `corrupt`).
            pub fn bends(&self) -> bool {
                match self {
                    $(Fault::$V { .. } => $bends,)*
                }
            }

            /// Bends bytes crossing the bus (`short(n)` keeps the first `n`,
            /// `corrupt(offset, xor)` XORs one byte; the others leave them).
            #[allow(unused_variables, clippy::unused_unit)]
            pub fn bend(&self, data: &mut Vec<u8>) {
                match *self {
                    $(Fault::$V $(($($t),+))? $({$($s),+})? => {
                        let $data: &mut Vec<u8> = data;
                        $bend
                    })*
                }
            }

            /// What it does at a transition site (nothing for a primitive that means
            /// nothing there).
            #[allow(unused_variables)]
            pub fn at_transition(&self) -> AtTransition {
                match *self {
                    $(Fault::$V $(($($t),+))? $({$($s),+})? => {
                        if $at_tr { $transition } else { AtTransition::default() }
                    })*
                }
            }

            /// What exploration injects of `kind` at a transfer whose payload is `len`
            /// bytes (a transition has none: `len` 0) and can end early only at a multiple of
            /// `packet` bytes ([`SiteKind::Transfer`]'s `packet`: the endpoint's max packet
            /// size at OUT, 1 at IN; an entry sees it as `explore(len, packet)`); `None` where
            /// it means nothing.
            #[allow(unused_variables)]
            pub(crate) fn explored(kind: FaultKind, len: u32, packet: u32) -> Option<Fault> {
                match kind {
                    $(FaultKind::$V => {
                        let $len: u32 = len;
                        $(let $epacket: u32 = packet.max(1);)?
                        $explore
                    })*
                }
            }

            /// What a seeded run injects of `kind` at a transfer whose payload is `len` bytes
            /// and can end early only at a multiple of `packet` bytes (as for
            /// [`Fault::explored`]; an entry sees it as `draw(len, below, packet)`), its
            /// parameters drawn by `below` (a draw in `0..n` from the primitive's own stream,
            /// `fault/<name>`); `None` for a primitive without parameters to draw (the
            /// explored fault is injected as it is).
            #[allow(unused_variables, unreachable_code)]
            pub(crate) fn drawn(
                kind: FaultKind,
                len: u32,
                packet: u32,
                below: &mut dyn FnMut(u64) -> u64,
            ) -> Option<Fault> {
                match kind {
                    $(FaultKind::$V => {
                        $(
                            let $dlen: u32 = len;
                            let $below = below;
                            $(let $dpacket: u32 = packet.max(1);)?
                            return Some($draw);
                        )?
                        None
                    })*
                }
            }

            /// Whether the parameters of a fault of `kind` at an IN transfer are settled by
            /// the reply (`short`: a cut of what the device returned, drawn over its length):
            /// its record is written, and a seeded run's draw made, when the reply is known.
            pub(crate) const fn at_reply(kind: FaultKind) -> bool {
                match kind {
                    $(FaultKind::$V => { false $(|| $at_reply)? })*
                }
            }

            /// What a guided sweep's mutation adds of `kind` at a site an entry crossed whose
            /// payload goes `dir` (an entry that needs it sees it as `mutant(dir)`).
            #[allow(unused_variables)]
            pub(crate) fn mutant(kind: FaultKind, dir: Dir) -> Fault {
                match kind {
                    $(FaultKind::$V => { $(let $mdir: Dir = dir;)? $mutant })*
                }
            }

            /// Parses the trial-name form: `stall`, `short(4)`, `delay(1ms)`,
            /// `corrupt(0,0xff)`.
            pub fn parse(s: &str) -> Result<Fault, String> {
                let text = s.trim();
                let (name, inner) = match text.split_once('(') {
                    Some((n, rest)) => (
                        n,
                        Some(
                            rest.strip_suffix(')')
                                .ok_or_else(|| format!("`{text}`: missing `)`"))?,
                        ),
                    ),
                    None => (text, None),
                };
                let args = $crate::fault::table::Args { text, inner };
                match FaultKind::parse(name) {
                    $(Some(FaultKind::$V) => { let $args = &args; $parse })*
                    None => Err(FaultKind::not_a_fault(text)),
                }
            }
        }

        impl fmt::Display for Fault {
            fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
                match *self {
                    $(Fault::$V $(($($t),+))? $({$($s),+})? => {
                        let $f: &mut fmt::Formatter<'_> = out;
                        $show
                    })*
                }
            }
        }

        /// The fault primitive named `name`, as a [`FaultKind`](crate::fault::FaultKind):
        /// how `#[calametra::scenario(faults = [..])]` names primitives, so that the
        /// compiler checks each name against the table (an unknown one is a compile error
        /// listing the known ones). Not a stable API.
        #[doc(hidden)]
        #[macro_export]
        macro_rules! __calametra_fault_kind {
            $(($name) => { $crate::fault::FaultKind::$V };)*
            // `faults = stall`: one name where `none`, `transport` or `all` could stand.
            $((@alone $name) => { $crate::fault::FaultKind::$V };)*
            (@alone $d other:tt) => {
                ::core::compile_error!(::core::concat!(
                    "`faults` expects `none`, `transport`, `all`, a fault primitive (",
                    $crate::__calametra_join_names!($($name)*),
                    ") or a list like `[stall, disconnect]`; found `",
                    ::core::stringify!($d other),
                    "`"
                ))
            };
            ($d other:tt) => {
                ::core::compile_error!(::core::concat!(
                    "unknown fault primitive `",
                    ::core::stringify!($d other),
                    "`; expected one of: ",
                    $crate::__calametra_join_names!($($name)*)
                ))
            };
        }
    };
}
pub(crate) use primitives;

/// An entry's `payload:` declaration as the direction it is restricted to (`any`: none).
macro_rules! payload {
    (any) => {
        None
    };
    (in) => {
        Some(Dir::In)
    };
    (out) => {
        Some(Dir::Out)
    };
}
pub(crate) use payload;

/// The names, joined by `, ` into one literal (for the unknown-primitive compile error).
#[macro_export]
#[doc(hidden)]
macro_rules! __calametra_join_names {
    ($first:ident $($rest:ident)*) => {
        ::core::concat!(::core::stringify!($first) $(, ", ", ::core::stringify!($rest))*)
    };
}
