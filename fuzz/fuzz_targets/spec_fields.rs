//! The project's specs with fields changed, deleted or retyped (structure-aware, so the
//! mutations reach `try_from_spec`'s cross-checks rather than the JSON parser): a spec that
//! still builds a model yields a model that enumerates and serves requests without panicking.
//!
//! Input: a base spec index, a count of edits, the edits (`edit`), then up to 48 requests
//! (`calametra_fuzz::Op`) for the model it builds.
#![no_main]

use calametra_core::spec::Spec;
use calametra_fuzz::{drive, enumerate, host, models_from, observe, Input, SPECS};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

fn bases() -> &'static Vec<Value> {
    static B: OnceLock<Vec<Value>> = OnceLock::new();
    B.get_or_init(|| {
        SPECS
            .iter()
            .map(|(_, b)| serde_json::from_slice(b).expect("spec JSON"))
            .collect()
    })
}

/// Paths (object keys and array indices) of every node, in document order.
fn paths(v: &Value, here: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                here.push(Seg::Key(k.clone()));
                paths(c, here, out);
                here.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                here.push(Seg::Index(i));
                paths(c, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Index(usize),
}

fn node<'a>(root: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    let mut v = root;
    for s in path {
        v = match (v, s) {
            (Value::Object(m), Seg::Key(k)) => m.get_mut(k)?,
            (Value::Array(a), Seg::Index(i)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

fn hex(bytes: &[u8], spaced: bool) -> String {
    let parts: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    parts.join(if spaced { " " } else { "" })
}

fn edit(root: &mut Value, input: &mut Input<'_>) {
    let mut all = Vec::new();
    paths(root, &mut Vec::new(), &mut all);
    let path = &all[input.u16() as usize % all.len()];
    let kind = input.u8();
    if kind % 12 == 0 {
        // Delete the node from its parent.
        if let Some((last, parent)) = path.split_last() {
            match (node(root, parent), last) {
                (Some(Value::Object(m)), Seg::Key(k)) => {
                    m.remove(k);
                }
                (Some(Value::Array(a)), Seg::Index(i)) if *i < a.len() => {
                    a.remove(*i);
                }
                _ => {}
            }
        }
        return;
    }
    let Some(v) = node(root, path) else { return };
    *v = match kind % 12 {
        1 => Value::from(input.u64()),
        2 => Value::from(input.u8()),
        3 => Value::from(-(input.u32() as i64) - 1),
        4 => serde_json::Number::from_f64(input.u16() as f64 / 7.0)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        5 => {
            let n = input.u8() as usize;
            Value::from(String::from_utf8_lossy(input.take(n)).into_owned())
        }
        6 | 7 => {
            let n = input.u16() as usize % 1024;
            Value::from(hex(input.take(n), kind % 12 == 7))
        }
        8 => Value::from(format!("0x{:x}", input.u64())),
        9 => Value::Bool(input.u8() & 1 == 1),
        10 => Value::Null,
        _ => match &*v {
            // Truncate or shorten what is there.
            Value::String(s) => {
                let mut s = s.clone();
                let n = input.u16() as usize;
                let cut = (0..=n.min(s.len())).rev().find(|&i| s.is_char_boundary(i));
                s.truncate(cut.unwrap_or(0));
                Value::from(s)
            }
            Value::Array(a) => {
                let mut a = a.clone();
                if let Some(first) = a.first().cloned() {
                    a.push(first);
                }
                Value::Array(a)
            }
            Value::Object(_) => Value::Array(Vec::new()),
            Value::Number(_) => Value::from(0),
            other => other.clone(),
        },
    };
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let which = input.u8() as usize % SPECS.len();
    let mut doc = bases()[which].clone();
    for _ in 0..(input.u8() % 8) {
        edit(&mut doc, &mut input);
    }
    let Ok(bytes) = serde_json::to_vec_pretty(&doc) else {
        return;
    };
    let Ok(spec) = Spec::parse(SPECS[which].0, &bytes) else {
        return;
    };
    let requests = input.rest();
    for model in models_from(&spec) {
        let mut h = host(model);
        enumerate(&mut h);
        drive(&mut h, &mut Input::new(requests), 48);
        observe(&mut h);
    }
});
