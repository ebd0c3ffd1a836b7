//! The README's examples work when copied verbatim into a new crate, as a new user copies them.
//!
//! The test takes from the README every ```toml block that starts with `# Cargo.toml` (the lines
//! a user adds to their manifest) and every ```rust block that starts with `// tests/<name>.rs`
//! (a test file), every ```json block whose info string names a file (```json specs/lamp.json`:
//! a spec the README shows, written there), plus the crate-level example of
//! `calametra/src/lib.rs` (as `tests/crate_doc.rs`). The manifest blocks' `[dev-dependencies]`
//! lines go into one table, and each `calametra-<crate> = { version = "0.1" }` becomes a path
//! into this workspace.
//! It writes a brand-new crate into a temp dir with those manifest lines (`version = "0.1"`
//! rewritten to a `path =` into this workspace's `calametra/`, since the crate is not fetched
//! from a registry here) and those files, copies the workspace's `Cargo.lock` so the versions
//! match, and runs `cargo test` in it with no `CALAMETRA_*` variable set (not `--offline`:
//! what a cargo cache happens to hold is no test's business; cargo fetches what is missing as
//! the lock file pins it). Then:
//!
//! - cargo exits 0, and every trial of every example ran and is `ok`;
//! - an example without `expect` saved nothing under `calametra-regressions/`;
//! - an example with `expect = "<inv>"` passed its `<scenario>::finds::<inv>` trial and saved
//!   the one case it found under `calametra-regressions/`, in a directory named after the
//!   scenario, as the README says; nothing else was saved.
//!
//! The crate builds into `<workspace>/target/readme-crate` (`CARGO_TARGET_DIR`), so the first run
//! compiles `calametra` once (about a minute on 2 cores) and later
//! runs are incremental (a few seconds).

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The fenced blocks of a Markdown text: (info string, body).
fn fenced_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        match &mut open {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    open = Some((info.trim().to_string(), String::new()));
                }
            }
            Some(_) if line.trim_end() == "```" => {
                blocks.extend(open.take());
            }
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    assert!(open.is_none(), "an unclosed ``` block");
    blocks
}

/// A test file of the examples: its target name (`tests/<name>.rs`) and its text.
#[derive(Debug)]
struct Example {
    name: String,
    text: String,
}

impl Example {
    /// The scenarios it declares: (function name, the `expect` invariant if any).
    fn scenarios(&self) -> Vec<(String, Option<String>)> {
        let mut out = Vec::new();
        let mut attr: Option<String> = None;
        for line in self.text.lines() {
            let l = line.trim();
            if l.starts_with("#[calametra::scenario") {
                attr = Some(l.to_string());
            } else if let Some(a) = &attr {
                if let Some(rest) = l.strip_prefix("fn ") {
                    let name = rest.split('(').next().unwrap_or("").trim().to_string();
                    let expect = a
                        .split("expect = \"")
                        .nth(1)
                        .and_then(|r| r.split('"').next())
                        .map(str::to_string);
                    out.push((name, expect));
                    attr = None;
                }
            }
        }
        out
    }
}

/// Manifest blocks as one manifest: every block's `[dev-dependencies]` lines in one table (a
/// user adds a line to the table they have), then the rest in order.
fn one_manifest(blocks: &[String]) -> String {
    let (mut deps, mut rest) = (String::new(), String::new());
    for b in blocks {
        let mut in_deps = false;
        for line in b.lines() {
            let t = line.trim();
            if t.starts_with('[') {
                in_deps = t == "[dev-dependencies]";
                if in_deps {
                    continue;
                }
            }
            let out = if in_deps { &mut deps } else { &mut rest };
            out.push_str(line);
            out.push('\n');
        }
        rest.push('\n');
    }
    format!("[dev-dependencies]\n{deps}\n{rest}")
}

/// The README's manifest lines, test files, and other files (```json specs/x.json blocks:
/// the path after the language).
fn readme_examples(readme: &str) -> (String, Vec<Example>, Vec<(String, String)>) {
    let mut blocks = Vec::new();
    let mut examples = Vec::new();
    let mut files = Vec::new();
    for (info, body) in fenced_blocks(readme) {
        let first = body.lines().next().unwrap_or("");
        if let Some(path) = info.strip_prefix("json ") {
            files.push((path.trim().to_string(), body));
        } else if info == "toml" && first.trim() == "# Cargo.toml" {
            blocks.push(body);
        } else if info.starts_with("rust") {
            let name = first
                .strip_prefix("// tests/")
                .and_then(|r| r.trim().strip_suffix(".rs"));
            if let Some(name) = name {
                examples.push(Example {
                    name: name.to_string(),
                    text: body,
                });
            }
        }
    }
    (one_manifest(&blocks), examples, files)
}

/// The crate-level example of `calametra/src/lib.rs`: the first ```no_run block of its `//!`
/// comment.
fn crate_doc_example(lib_rs: &str) -> Option<String> {
    let doc: String = lib_rs
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    fenced_blocks(&doc)
        .into_iter()
        .find(|(info, _)| info == "no_run" || info == "rust,no_run")
        .map(|(_, body)| body)
}

/// `cargo test` output: (trial name, outcome) of every `test NAME ... OUTCOME` line.
fn trial_lines(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter_map(|l| l.strip_prefix("test "))
        .filter_map(|l| l.split_once(" ... "))
        .map(|(n, o)| (n.trim().to_string(), o.trim().to_string()))
        .collect()
}

#[test]
fn readme_examples_pass_in_a_new_crate() {
    let ws = workspace();
    let readme = std::fs::read_to_string(ws.join("README.md")).expect("read README.md");
    let (manifest, mut examples, files) = readme_examples(&readme);
    assert!(
        manifest.contains("[dev-dependencies]") && manifest.contains("[[test]]"),
        "the README shows no ```toml block starting `# Cargo.toml` with the dev-dependency and the [[test]] entries:\n{manifest}"
    );
    let dep = "calametra = { version = \"0.1\" }";
    assert!(
        manifest.contains(dep),
        "the README's manifest lines do not have `{dep}`:\n{manifest}"
    );
    assert!(
        examples.len() >= 2,
        "expected the README's scenario and its `expect` example (```rust blocks starting `// tests/<name>.rs`), found {examples:?}"
    );
    for e in &examples {
        let entry = format!("[[test]]\nname = \"{}\"\nharness = false", e.name);
        assert!(
            manifest.contains(&entry),
            "the README shows tests/{}.rs but not its manifest entry:\n{entry}\nin\n{manifest}",
            e.name
        );
    }
    assert!(
        examples
            .iter()
            .any(|e| e.scenarios().iter().any(|(_, x)| x.is_some())),
        "no README example uses `expect = \"...\"`"
    );

    let lib_rs = std::fs::read_to_string(ws.join("calametra/src/lib.rs"))
        .expect("read calametra/src/lib.rs");
    let doc = crate_doc_example(&lib_rs).expect("calametra/src/lib.rs has a crate-level example");
    examples.push(Example {
        name: "crate_doc".into(),
        text: doc,
    });

    // The new crate, as a user writes it.
    let tmp = tempfile::tempdir().expect("a temp dir");
    let krate = tmp.path().join("readme-example");
    std::fs::create_dir_all(krate.join("tests")).unwrap();
    std::fs::create_dir_all(krate.join("src")).unwrap();
    let calametra = ws.join("calametra");
    let local_dep = format!(
        "calametra = {{ path = {:?} }}",
        calametra.display().to_string()
    );
    let mut toml = String::from(
        "[package]\nname = \"readme-example\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         # What `cargo new` writes (edition 2024; the README's doctests build with 2021), and a\n\
         # workspace of its own wherever the temp dir is.\n[workspace]\n\n",
    );
    // Every `calametra-<crate> = { version = "0.1" }` the README adds is this workspace's.
    let mut manifest = manifest.replace(dep, &local_dep);
    for c in ["calametra-models", "calametra-usb", "calametra-capture"] {
        manifest = manifest.replace(
            &format!("{c} = {{ version = \"0.1\" }}"),
            &format!("{c} = {{ path = {:?} }}", ws.join(c).display().to_string()),
        );
    }
    toml.push_str(&manifest);
    toml.push_str("\n[[test]]\nname = \"crate_doc\"\nharness = false\n");
    std::fs::write(krate.join("Cargo.toml"), &toml).unwrap();
    std::fs::write(krate.join("src/lib.rs"), "//! The driver under test.\n").unwrap();
    for e in &examples {
        std::fs::write(krate.join(format!("tests/{}.rs", e.name)), &e.text).unwrap();
    }
    for (path, text) in &files {
        let p = krate.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::copy(ws.join("Cargo.lock"), krate.join("Cargo.lock")).expect("copy Cargo.lock");

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["test"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", ws.join("target").join("readme-crate"));
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| k.starts_with("CALAMETRA_")) {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().expect("run cargo test in the new crate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let context = format!(
        "crate: {}\nCargo.toml:\n{toml}\noutput:\n{text}",
        krate.display()
    );
    assert!(
        out.status.success(),
        "cargo test failed in the new crate\n{context}"
    );

    let trials = trial_lines(&text);
    // The cases saved in the new crate, by the directory they sit in (named after the scenario,
    // under `calametra-regressions/`, per test target or not).
    let saved = json_files(&krate.join("calametra-regressions"));
    let saved_for = |scenario: &str| -> Vec<&PathBuf> {
        saved
            .iter()
            .filter(|p| {
                p.parent()
                    .and_then(|d| d.file_name())
                    .is_some_and(|d| d == scenario)
            })
            .collect()
    };
    let mut expected_cases = 0;
    for e in &examples {
        let scenarios = e.scenarios();
        assert!(
            !scenarios.is_empty(),
            "tests/{}.rs declares no scenario\n{context}",
            e.name
        );
        for (scenario, expect) in scenarios {
            let prefix = format!("{scenario}::");
            let mine: Vec<&(String, String)> = trials
                .iter()
                .filter(|(n, _)| n.starts_with(&prefix))
                .collect();
            assert!(
                mine.len() >= 2,
                "tests/{}.rs: `{scenario}` ran {} trial(s)\n{context}",
                e.name,
                mine.len()
            );
            for (n, o) in &mine {
                assert_eq!(o, "ok", "tests/{}.rs: trial {n}\n{context}", e.name);
            }
            let ran = |n: &str| mine.iter().any(|(m, _)| m == n);
            assert!(
                ran(&format!("{scenario}::baseline")),
                "no baseline trial for `{scenario}`\n{context}"
            );
            match expect {
                None => {
                    assert!(
                        mine.iter().any(|(n, _)| n.contains("::seed::")),
                        "`{scenario}` ran no seeded schedule\n{context}"
                    );
                    assert!(
                        saved_for(&scenario).is_empty(),
                        "tests/{}.rs passed but saved a failure: {:?}\n{context}",
                        e.name,
                        saved_for(&scenario)
                    );
                }
                Some(inv) => {
                    assert!(
                        ran(&format!("{scenario}::finds::{inv}")),
                        "no `{scenario}::finds::{inv}` trial\n{context}"
                    );
                    let cases = saved_for(&scenario).len();
                    assert_eq!(
                        cases, 1,
                        "`{scenario}::finds::{inv}` saved {cases} case(s) under calametra-regressions/, one expected: {saved:?}\n{context}"
                    );
                    expected_cases += cases;
                }
            }
        }
    }
    assert_eq!(
        saved.len(),
        expected_cases,
        "the new crate saved cases no `expect` example accounts for: {saved:?}\n{context}"
    );
}

/// Every `.json` file under `dir`, recursively (none when it does not exist).
fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(json_files(&p));
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    out.sort();
    out
}
