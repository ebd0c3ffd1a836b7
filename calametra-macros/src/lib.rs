//! `#[calametra::scenario]`: parses and validates the attribute's arguments and emits an
//! `inventory` registration through `::calametra::__private`. It only parses and emits; the
//! runtime in `calametra` does the work. Bad arguments are compile errors that point at the
//! argument. Fault primitives are not known here: a name in `faults = [..]` is emitted as the
//! core table's `fault_kind!(name)`, which the compiler resolves or refuses with the list.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Error, Expr, ExprLit, ItemFn, Lit, LitStr, Meta, Token};

const KNOWN: &str = "spec, schedules, faults, seed, max_steps, virtual_timeout, expect, fault_schedule, guest, marks, marks_floor";

struct Args(Punctuated<Meta, Token![,]>);

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        Ok(Args(Punctuated::parse_terminated(input)?))
    }
}

#[derive(Default)]
struct Parsed {
    spec: Option<LitStr>,
    fault_schedule: Option<LitStr>,
    schedules: Option<u64>,
    faults: Option<TokenStream2>,
    seed: Option<u64>,
    max_steps: Option<u64>,
    virtual_timeout: Option<u64>,
    expect: Option<LitStr>,
    /// `guest = lockstep`: the span of the argument.
    guest: Option<proc_macro2::Span>,
    /// `marks = <expr>`: the coverage marks the scenario declares (anything iterable over
    /// strings: `["A", "B"]`, or a model's `marks::ALL`).
    marks: Option<Expr>,
    /// `marks_floor = N`: each declared mark must be reached by at least N fixed seeds.
    marks_floor: Option<(u64, proc_macro2::Span)>,
    /// Spans of the arguments that mean nothing to a guest scenario.
    sim_only: Vec<(String, proc_macro2::Span)>,
}

fn lit_str(e: &Expr, what: &str) -> syn::Result<LitStr> {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        _ => Err(Error::new(
            e.span(),
            format!("`{what}` expects a string literal"),
        )),
    }
}

fn lit_int(e: &Expr, what: &str) -> syn::Result<u64> {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i
            .base10_parse::<u64>()
            .map_err(|_| Error::new(e.span(), format!("`{what}` expects an unsigned integer"))),
        _ => Err(Error::new(
            e.span(),
            format!("`{what}` expects an unsigned integer"),
        )),
    }
}

/// Parses `250us`, `1.5ms`, `2s`, `100ns`, `10m`, `6h`: the duration grammar of
/// `CALAMETRA_SWEEP` too (`calametra_core::sweep::parse_duration`; the macro crate only parses
/// and emits, so it keeps its own copy of these few lines, and the tests crate compiles a
/// scenario with every unit).
fn duration_ns(s: &LitStr) -> syn::Result<u64> {
    let v = s.value();
    let t = v.trim();
    let (num, scale) = [
        ("ns", 1.0),
        ("us", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
        ("m", 60e9),
        ("h", 3600e9),
    ]
        .iter()
        .find_map(|(suf, sc)| t.strip_suffix(suf).map(|n| (n, *sc)))
        .ok_or_else(|| {
            Error::new(
                s.span(),
                "`virtual_timeout` expects a duration like \"500ms\", \"2s\", \"10m\", \"6h\" or \"250us\"",
            )
        })?;
    let n: f64 = num.trim().parse().map_err(|_| {
        Error::new(
            s.span(),
            "`virtual_timeout` expects a duration like \"500ms\", \"2s\", \"10m\", \"6h\" or \"250us\"",
        )
    })?;
    if !(n > 0.0) || !n.is_finite() {
        return Err(Error::new(
            s.span(),
            "`virtual_timeout` must be greater than zero",
        ));
    }
    Ok((n * scale).round() as u64)
}

/// A fault primitive named in `faults = ..`: emitted as the core table's `fault_kind!` of its
/// name, spanned at the name, so the compiler checks it against the table (an unknown name is
/// a compile error listing the known ones). The macro keeps no list of primitives.
fn kind(p: &syn::Path) -> syn::Result<TokenStream2> {
    let id = p
        .get_ident()
        .ok_or_else(|| Error::new(p.span(), "expected a fault primitive's name, like `stall`"))?;
    Ok(quote_spanned!(id.span()=> ::calametra::__private::fault_kind!(#id)))
}

fn faults(e: &Expr) -> syn::Result<TokenStream2> {
    match e {
        Expr::Path(p) => {
            let id = p
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            match id.as_str() {
                "none" => Ok(quote!(::calametra::__private::FaultsArg::None)),
                "transport" => Ok(quote!(::calametra::__private::FaultsArg::Transport)),
                "all" => Ok(quote!(::calametra::__private::FaultsArg::All)),
                // Any other name: one primitive (`faults = stall`), checked by the compiler.
                _ => {
                    let id = p.path.get_ident().ok_or_else(|| {
                        Error::new(
                            e.span(),
                            "`faults` expects `none`, `transport`, `all` or a list like `[stall, disconnect]`",
                        )
                    })?;
                    let k =
                        quote_spanned!(id.span()=> ::calametra::__private::fault_kind!(@alone #id));
                    Ok(quote!(::calametra::__private::FaultsArg::Only(&[#k])))
                }
            }
        }
        Expr::Array(a) => {
            let mut ks = Vec::new();
            for el in &a.elems {
                match el {
                    Expr::Path(p) => ks.push(kind(&p.path)?),
                    other => {
                        return Err(Error::new(other.span(), "expected a fault primitive name"))
                    }
                }
            }
            if ks.is_empty() {
                return Err(Error::new(
                    a.span(),
                    "an empty fault list; write `faults = none`",
                ));
            }
            Ok(quote!(::calametra::__private::FaultsArg::Only(&[#(#ks),*])))
        }
        _ => Err(Error::new(
            e.span(),
            "`faults` expects `none`, `transport`, `all` or a list like `[stall, disconnect]`",
        )),
    }
}

fn parse_args(args: Args) -> syn::Result<Parsed> {
    let mut p = Parsed::default();
    let mut seen: Vec<String> = Vec::new();
    for meta in args.0 {
        let nv = match &meta {
            Meta::NameValue(nv) => nv,
            other => {
                return Err(Error::new(
                    other.span(),
                    format!("expected `name = value`; the arguments are: {KNOWN}"),
                ))
            }
        };
        let name = nv
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        if seen.contains(&name) {
            return Err(Error::new(
                nv.path.span(),
                format!("`{name}` is given twice"),
            ));
        }
        seen.push(name.clone());
        let v = &nv.value;
        if matches!(
            name.as_str(),
            "max_steps" | "virtual_timeout" | "fault_schedule" | "marks_floor"
        ) {
            p.sim_only.push((name.clone(), nv.path.span()));
        }
        match name.as_str() {
            "spec" => p.spec = Some(lit_str(v, "spec")?),
            "fault_schedule" => p.fault_schedule = Some(lit_str(v, "fault_schedule")?),
            "schedules" => {
                let n = lit_int(v, "schedules")?;
                if n > 1_000_000 {
                    return Err(Error::new(v.span(), "`schedules` is at most 1000000"));
                }
                p.schedules = Some(n)
            }
            "faults" => p.faults = Some(faults(v)?),
            "seed" => p.seed = Some(lit_int(v, "seed")?),
            "max_steps" => {
                let n = lit_int(v, "max_steps")?;
                if n == 0 {
                    return Err(Error::new(
                        v.span(),
                        "`max_steps` must be greater than zero",
                    ));
                }
                p.max_steps = Some(n)
            }
            "virtual_timeout" => {
                p.virtual_timeout = Some(duration_ns(&lit_str(v, "virtual_timeout")?)?)
            }
            "marks" => p.marks = Some(v.clone()),
            "marks_floor" => {
                let n = lit_int(v, "marks_floor")?;
                if n == 0 {
                    return Err(Error::new(
                        v.span(),
                        "`marks_floor` must be at least 1 (seeds reaching each declared mark)",
                    ));
                }
                p.marks_floor = Some((n, v.span()))
            }
            "guest" => {
                let ok = matches!(v, Expr::Path(p) if p.path.is_ident("lockstep"));
                if !ok {
                    return Err(Error::new(
                        v.span(),
                        "`guest` expects `lockstep` (a Linux guest under the lockstep QEMU)",
                    ));
                }
                p.guest = Some(nv.path.span())
            }
            "expect" => {
                let s = lit_str(v, "expect")?;
                if s.value().is_empty() {
                    return Err(Error::new(
                        s.span(),
                        "`expect` names the invariant the scenario must find",
                    ));
                }
                p.expect = Some(s)
            }
            _ => {
                return Err(Error::new(
                    nv.path.span(),
                    format!("unknown argument `{name}`; expected one of: {KNOWN}"),
                ))
            }
        }
    }
    if p.guest.is_some() {
        if let Some((name, span)) = p.sim_only.first() {
            return Err(Error::new(
                *span,
                format!("`{name}` does not apply to a guest scenario (the guest's clock and budget are the lockstep QEMU's)"),
            ));
        }
    }
    if let (Some((_, span)), None) = (&p.marks_floor, &p.marks) {
        return Err(Error::new(
            *span,
            "`marks_floor` needs the marks it applies to: add `marks = [\"MarkName\", ...]`",
        ));
    }
    if let (Some(_), Some(e)) = (&p.seed, &p.expect) {
        return Err(Error::new(
            e.span(),
            "`expect` explores many seeds; it cannot be combined with a pinned `seed`",
        ));
    }
    Ok(p)
}

/// The file an argument names (`spec = "specs/x.json"`), embedded with `include_bytes!`. A file
/// that is not there is this macro's own error, naming the path as written and where it is
/// looked for: the compiler's error would name the absolute path it tried, which differs from
/// checkout to checkout (and from target directory to target directory under trybuild).
fn embedded(path: &Option<LitStr>, what: &str) -> TokenStream2 {
    match path {
        None => quote!(::core::option::Option::None),
        Some(s) => {
            let span = s.span();
            if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
                let full = std::path::Path::new(&dir).join(s.value());
                if !full.is_file() {
                    let why = if full.exists() {
                        "is not a regular file"
                    } else {
                        "does not exist"
                    };
                    let msg = format!(
                        "the {what} file `{}` {why}; the path is relative to the crate's directory (where its Cargo.toml is)",
                        s.value()
                    );
                    return quote_spanned! {span=>
                        ::core::option::Option::Some(::calametra::__private::Embedded {
                            path: #s,
                            bytes: ::core::compile_error!(#msg),
                        })
                    };
                }
            }
            quote_spanned! {span=>
                ::core::option::Option::Some(::calametra::__private::Embedded {
                    path: #s,
                    bytes: ::core::include_bytes!(::core::concat!(::core::env!("CARGO_MANIFEST_DIR"), "/", #s)),
                })
            }
        }
    }
}

fn opt_u64(v: Option<u64>) -> TokenStream2 {
    match v {
        Some(n) => quote!(::core::option::Option::Some(#n)),
        None => quote!(::core::option::Option::None),
    }
}

/// Declares a Calametra scenario: `fn name(sim: &mut Sim)` run under the harness as a baseline,
/// one trial per fault site and primitive, one per seeded schedule, and saved regressions.
///
/// Arguments: `spec = "specs/x.json"`, `schedules = 48`, `faults = none | transport | all |
/// [stall, ...]` (each primitive named through the core's table, `fault_kind!`, so the
/// compiler checks it; the macro keeps no list of primitives), `seed = 0x..`, `max_steps = N`, `virtual_timeout = "2s"`,
/// `expect = "invariant"`, `fault_schedule = "specs/faults/x.json"`, `marks = ["A", ...]` (the
/// coverage marks the scenario declares), `marks_floor = N` (a `marks` trial fails when a
/// declared mark is reached by fewer than N of the fixed seeds).
///
/// With `guest = lockstep` the function is `fn(guest: &mut calametra_qemu::Guest)` and each
/// trial boots a Linux guest under the lockstep QEMU serving the model it attaches (the crate
/// depends on `calametra-qemu`); the trials have the same names and are ignored unless asked for.
#[proc_macro_attribute]
pub fn scenario(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr.into(), item.into()) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The attribute put on the scenario function so that rust-analyzer offers a "Run Test" button
/// for it. rust-analyzer decides a function is a test from the text of its attributes after
/// expansion, not from what they resolve to (`crates/hir-def/src/attrs.rs`, `AttrFlags::IS_TEST`;
/// `runnable_fn` in `crates/ide/src/runnables.rs` then asks `hir::Function::is_test`). Its test
/// path is the function's path in the crate (`m::name`), which is `ScenarioDef::path`, and the
/// harness runs every trial of a scenario for `--exact <that path>`.
///
/// For rustc this is an inert tool attribute in the `rust_analyzer` tool namespace: no code, no
/// lint, the function is untouched (a real `#[test]` would remove it from a `harness = false`
/// target, and `cfg_attr(rust_analyzer, test)` trips `unexpected_cfgs` in the user's crate).
/// The long path is the one every rust-analyzer matches: up to late 2025 it compared the last
/// four segments with `core::prelude::v1::test` (so `rust_analyzer::test` is not a test for the
/// rust-analyzer of Rust 1.86); since, the last segment `test`, then `prelude`, then `core`.
/// Checked with the rust-analyzer of Rust 1.86, 1.95 and 1.100 (scripts/ide-runnables.sh).
fn ide_test_marker() -> TokenStream2 {
    quote!(#[rust_analyzer::core::prelude::v1::test])
}

fn expand(attr: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let args: Args = syn::parse2(attr)?;
    let p = parse_args(args)?;
    let f: ItemFn = syn::parse2(item)?;
    let sig = &f.sig;
    if sig.asyncness.is_some() {
        return Err(Error::new(
            sig.asyncness.span(),
            "a scenario is a plain `fn(sim: &mut Sim)`; spawn async tasks inside it",
        ));
    }
    if !sig.generics.params.is_empty() {
        return Err(Error::new(
            sig.generics.span(),
            "a scenario cannot be generic",
        ));
    }
    if sig.inputs.len() != 1 {
        return Err(Error::new(
            if sig.inputs.is_empty() {
                sig.ident.span()
            } else {
                sig.inputs.span()
            },
            if p.guest.is_some() {
                "a guest scenario takes exactly one argument: `guest: &mut Guest`"
            } else {
                "a scenario takes exactly one argument: `sim: &mut Sim`"
            },
        ));
    }
    let name = &sig.ident;
    let name_str = name.to_string();
    let spec = embedded(&p.spec, "spec");
    let schedule_file = embedded(&p.fault_schedule, "fault schedule");
    let schedules = opt_u64(p.schedules);
    let seed = opt_u64(p.seed);
    let max_steps = opt_u64(p.max_steps);
    let vt = opt_u64(p.virtual_timeout);
    let faults = p
        .faults
        .unwrap_or_else(|| quote!(::calametra::__private::FaultsArg::None));
    let expect = match &p.expect {
        Some(s) => quote!(::core::option::Option::Some(#s)),
        None => quote!(::core::option::Option::None),
    };
    let body = match p.guest {
        // The runner lives in calametra-qemu, which a crate with guest scenarios depends on.
        Some(span) => quote_spanned! {span=>
            ::calametra::__private::Body::Guest(|| ::calametra_qemu::scenario::runner(#name))
        },
        None => quote!(::calametra::__private::Body::Sim(#name)),
    };
    let marker = ide_test_marker();
    let marks = match &p.marks {
        Some(e) => quote! {
            || ::core::iter::IntoIterator::into_iter(#e)
                .map(|m| ::std::string::ToString::to_string(&m))
                .collect()
        },
        None => quote!(::std::vec::Vec::new),
    };
    let marks_floor = opt_u64(p.marks_floor.map(|(n, _)| n));
    Ok(quote! {
        #marker
        #f

        ::calametra::__private::inventory::submit! {
            ::calametra::__private::ScenarioDef {
                module: ::core::module_path!(),
                name: #name_str,
                func: #body,
                manifest_dir: ::core::env!("CARGO_MANIFEST_DIR"),
                package: ::core::env!("CARGO_PKG_NAME"),
                target: ::core::env!("CARGO_CRATE_NAME"),
                spec: #spec,
                fault_schedule: #schedule_file,
                schedules: #schedules,
                faults: #faults,
                seed: #seed,
                max_steps: #max_steps,
                virtual_timeout_ns: #vt,
                expect: #expect,
                marks: #marks,
                marks_floor: #marks_floor,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scenario function keeps its name and gets the attribute rust-analyzer takes for a test
    /// (scripts/ide-runnables.sh checks the run button itself, with the real rust-analyzer).
    #[test]
    fn the_scenario_function_is_marked_for_rust_analyzer() {
        let out = expand(
            quote!(schedules = 2),
            quote!(
                fn probe(sim: &mut Sim) {}
            ),
        )
        .unwrap()
        .to_string();
        let marked = quote!(#[rust_analyzer::core::prelude::v1::test] fn probe).to_string();
        assert!(out.starts_with(&marked), "{out}");
    }
}
