//! The names a model declares for others to use: its coverage marks (what
//! [`DevCtx::mark`](crate::device::DevCtx::mark) records and a scenario's `marks = ...`
//! counts) and its invariants' names (what a scenario passes to `sim.invariant` and a test
//! matches a failure by). One macro, [`names!`](macro@crate::names), so every model's lists look
//! alike: a module of documented `&str` constants and `ALL`, every one in declaration order.
//!
//! Nothing here records a mark or checks an invariant; it only names them.

/// Declares a module of names: one documented `pub const NAME: &str` each, and `ALL`, an
/// array of every one in declaration order (for `#[calametra::scenario(marks = marks::ALL)]`).
///
/// ```
/// calametra_core::names! {
///     /// Coverage marks the counter records.
///     pub mod marks {
///         /// An add past the limit was refused.
///         REFUSED_PAST_LIMIT = "RefusedPastLimit";
///         /// The counter reached its limit.
///         FULL = "Full";
///     }
/// }
/// assert_eq!(marks::FULL, "Full");
/// assert_eq!(marks::ALL, ["RefusedPastLimit", "Full"]);
/// ```
#[macro_export]
macro_rules! names {
    (
        $(#[$meta:meta])*
        $vis:vis mod $module:ident {
            $( $(#[$doc:meta])* $name:ident = $value:literal; )*
        }
    ) => {
        $(#[$meta])*
        $vis mod $module {
            $( $(#[$doc])* pub const $name: &str = $value; )*
            /// Every name of this module, in declaration order.
            pub const ALL: [&str; { let all: &[&str] = &[$($value),*]; all.len() }] =
                [$($name),*];
        }
    };
}
