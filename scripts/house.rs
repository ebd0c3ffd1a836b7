//! The house rules of the workspace's sources, checked (`scripts/house.sh` builds and runs this
//! with `rustc` alone: no dependency, no Cargo project):
//!
//! 1. No import circle between the files of a crate. Each file is a place; a file that uses an
//!    item of another file's module (`use`, or a path `crate::..`, `super::..`, `self::..` or a
//!    child module's name in the code) depends on that file. A module split over its own
//!    submodule files counts as one place: a file may use its ancestors' items (a child's
//!    `super::X` is not an edge), and its parent declares it. A binary's root (`main.rs`,
//!    `src/bin/*.rs`) is not such a parent: it uses its commands, so a command that uses an item
//!    of the root closes a circle.
//! 2. No non-test file over 900 lines: lines inside a `#[cfg(test)] mod x { .. }` are tests, and
//!    a file declared `#[cfg(test)] mod x;` is a test file (neither is checked, for either rule).
//!
//! Usage: `house CRATE_DIR..`; prints each circle (the files and the lines of the uses that
//! close it) and each file over the limit, and exits 1 when there is any, 0 when none, 2 on a
//! crate that cannot be read. Nothing here edits a file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The most non-test lines a file may have.
const MAX_LINES: usize = 900;

/// A token of Rust source, as much of one as the checks need.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

/// Tokens with their 1-based lines; comments, strings and character literals are dropped.
fn lex(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut out) = (0usize, 1usize, Vec::new());
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"'
            || (ch == 'b' && at(i + 1) == '"')
            || ((ch == 'r' || (ch == 'b' && at(i + 1) == 'r')) && {
                let mut j = i + if ch == 'b' { 2 } else { 1 };
                while at(j) == '#' {
                    j += 1;
                }
                at(j) == '"'
            })
        {
            // A string: plain (escapes), or raw (`r#".."#`, no escapes).
            let raw = ch == 'r' || at(i + 1) == 'r';
            while c[i] != '"' && c[i] != '#' {
                i += 1;
            }
            let mut hashes = 0;
            while c[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1; // the opening quote
            while i < c.len() {
                if c[i] == '\n' {
                    line += 1;
                }
                if !raw && c[i] == '\\' {
                    if at(i + 1) == '\n' {
                        line += 1;
                    }
                    i += 2;
                    continue;
                }
                if c[i] == '"' && (0..hashes).all(|k| at(i + 1 + k) == '#') {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            // A character literal (`'a'`, `'\n'`, `'\u{1b}'`, `b'x'`), or a lifetime (`'a`).
            let q = if ch == 'b' { i + 1 } else { i };
            if at(q + 1) == '\\' {
                i = q + 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(q + 2) == '\'' {
                i = q + 3;
            } else {
                i = q + 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let mut word: String = c[s..i].iter().collect();
            if word == "r" && at(i) == '#' {
                // A raw identifier.
                let s = i + 1;
                i = s;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                word = c[s..i].iter().collect();
            }
            out.push((Tok::Ident(word), line));
        } else if ch == ':' && at(i + 1) == ':' {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

fn ident(t: Option<&(Tok, usize)>) -> Option<&str> {
    match t {
        Some((Tok::Ident(s), _)) => Some(s),
        _ => None,
    }
}

fn is(t: Option<&(Tok, usize)>, p: char) -> bool {
    matches!(t, Some((Tok::Punct(q), _)) if *q == p)
}

/// Whether the item whose first token (after attributes and visibility) is at `i` carries
/// `#[cfg(test)]`: the index of that attribute's `#`.
fn cfg_test_before(toks: &[(Tok, usize)], mut i: usize) -> Option<usize> {
    // Visibility: `pub`, `pub(crate)`, `pub(super)`, `pub(in path)`.
    while i > 0 {
        match &toks[i - 1].0 {
            Tok::Ident(w) if w == "pub" || w == "crate" || w == "super" || w == "in" => i -= 1,
            Tok::Punct('(') | Tok::Punct(')') => i -= 1,
            _ => break,
        }
    }
    // Attributes, last first: `# [ .. ]`.
    while i > 0 && is(toks.get(i - 1), ']') {
        let end = i - 1;
        let mut depth = 0;
        let mut j = end;
        loop {
            if is(toks.get(j), ']') {
                depth += 1;
            } else if is(toks.get(j), '[') {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            if j == 0 {
                return None;
            }
            j -= 1;
        }
        let inner: Vec<&Tok> = toks[j + 1..end].iter().map(|t| &t.0).collect();
        if inner
            == [
                &Tok::Ident("cfg".into()),
                &Tok::Punct('('),
                &Tok::Ident("test".into()),
                &Tok::Punct(')'),
            ]
            && j > 0
        {
            return Some(j - 1);
        }
        if j == 0 || !is(toks.get(j - 1), '#') {
            return None;
        }
        i = j - 1;
    }
    None
}

/// What one file says: the modules it declares in files, the paths it uses (absolute module
/// paths, with the line), and its non-test line count.
#[derive(Default, Debug)]
struct FileFacts {
    /// `mod x;` (not under `#[cfg(test)]`).
    children: Vec<String>,
    /// Test files it declares (`#[cfg(test)] mod x;`), not read.
    test_children: usize,
    /// Paths used, relative to where they were written: (`self`/`super`/`crate`-based
    /// segments as written, the inline modules around, the line).
    uses: Vec<(Vec<String>, Vec<String>, usize)>,
    /// Lines, less those of `#[cfg(test)]` inline modules.
    non_test_lines: usize,
}

/// Expands a use tree starting at `toks[*i]` into paths (segments), advancing `*i` past it.
fn use_tree(
    toks: &[(Tok, usize)],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, usize)>,
) {
    let mut segs = prefix.to_vec();
    if matches!(toks.get(*i), Some((Tok::Path, _))) {
        // `::name`: an external crate.
        segs.push("::".into());
        *i += 1;
    }
    loop {
        match toks.get(*i) {
            Some((Tok::Ident(w), l)) if w != "as" => {
                segs.push(w.clone());
                let line = *l;
                *i += 1;
                if matches!(toks.get(*i), Some((Tok::Path, _))) {
                    *i += 1;
                    continue;
                }
                if ident(toks.get(*i)) == Some("as") {
                    *i += 2;
                }
                // `a::{self, ..}` names `a`.
                if segs.len() > 1 && segs.last().is_some_and(|l| l == "self") {
                    segs.pop();
                }
                out.push((segs, line));
                return;
            }
            Some((Tok::Punct('{'), _)) => {
                *i += 1;
                while *i < toks.len() && !is(toks.get(*i), '}') {
                    use_tree(toks, i, &segs, out);
                    if is(toks.get(*i), ',') {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            Some((Tok::Punct('*'), l)) => {
                *i += 1;
                out.push((segs, *l));
                return;
            }
            _ => {
                // Something this reading does not know: skip to the tree's end.
                while *i < toks.len()
                    && !is(toks.get(*i), ',')
                    && !is(toks.get(*i), ';')
                    && !is(toks.get(*i), '}')
                {
                    *i += 1;
                }
                return;
            }
        }
    }
}

fn facts(src: &str, child_names_of_file: &dyn Fn(&[String]) -> bool) -> FileFacts {
    let toks = lex(src);
    let mut f = FileFacts::default();
    let total = src.lines().count();
    let mut test_lines = 0usize;
    // Inline modules open around the cursor: (name, brace depth inside, under cfg(test)).
    let mut inline: Vec<(String, usize, bool, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0usize;
    let in_test = |inline: &Vec<(String, usize, bool, usize)>| inline.iter().any(|m| m.2);
    while i < toks.len() {
        let (t, line) = &toks[i];
        match t {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if let Some(m) = inline.last() {
                    if m.1 == depth {
                        let m = inline.pop().expect("just seen");
                        if m.2 && !in_test(&inline) {
                            test_lines += line + 1 - m.3;
                        }
                    }
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(w)
                if w == "mod"
                    && ident(toks.get(i + 1)).is_some()
                    && (i == 0 || !matches!(toks[i - 1].0, Tok::Path)) =>
            {
                let name = ident(toks.get(i + 1)).expect("checked").to_string();
                let attr = cfg_test_before(&toks, i);
                let test = attr.is_some();
                if is(toks.get(i + 2), ';') {
                    if inline.is_empty() {
                        if test {
                            f.test_children += 1;
                        } else {
                            f.children.push(name);
                        }
                    }
                    i += 3;
                } else if is(toks.get(i + 2), '{') {
                    // The attribute's line starts the test lines.
                    let first = attr.map(|a| toks[a].1).unwrap_or(*line);
                    depth += 1;
                    inline.push((name, depth, test, first));
                    i += 3;
                } else {
                    i += 1;
                }
            }
            Tok::Ident(w)
                if w == "use" && !matches!(toks.get(i + 1), Some((Tok::Punct('<'), _))) =>
            {
                i += 1;
                let mut paths = Vec::new();
                use_tree(&toks, &mut i, &[], &mut paths);
                while i < toks.len() && !is(toks.get(i), ';') {
                    i += 1;
                }
                i += 1;
                if !in_test(&inline) {
                    let around: Vec<String> = inline.iter().map(|m| m.0.clone()).collect();
                    for (p, l) in paths {
                        f.uses.push((p, around.clone(), l));
                    }
                }
            }
            Tok::Ident(w)
                if matches!(toks.get(i + 1), Some((Tok::Path, _)))
                    && (i == 0 || !matches!(toks[i - 1].0, Tok::Path)) =>
            {
                let mut segs = vec![w.clone()];
                let mut j = i + 1;
                while matches!(toks.get(j), Some((Tok::Path, _))) {
                    match ident(toks.get(j + 1)) {
                        Some(s) => segs.push(s.to_string()),
                        None => break,
                    }
                    j += 2;
                }
                let first = segs[0].as_str();
                let rooted = matches!(first, "crate" | "super" | "self");
                if !in_test(&inline)
                    && (rooted || (inline.is_empty() && child_names_of_file(&segs[..1])))
                {
                    let around: Vec<String> = inline.iter().map(|m| m.0.clone()).collect();
                    f.uses.push((segs, around, *line));
                }
                i = j.max(i + 1);
            }
            _ => i += 1,
        }
    }
    f.non_test_lines = total.saturating_sub(test_lines);
    f
}

/// A file of a crate, in the module tree of one root.
struct Place {
    file: PathBuf,
    module: Vec<String>,
    facts: FileFacts,
}

/// Where the children of the module in `file` are: beside a root or a `mod.rs`, else in the
/// directory named after the file.
fn child_dir(file: &Path, is_root: bool) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if is_root || stem == "mod" {
        dir
    } else {
        dir.join(stem)
    }
}

/// Reads the module tree of one root: every file it declares, recursively.
fn tree(root: &Path) -> Result<Vec<Place>, String> {
    let mut places: Vec<Place> = Vec::new();
    let mut todo = vec![(root.to_path_buf(), Vec::<String>::new(), true)];
    while let Some((file, module, is_root)) = todo.pop() {
        let src = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        // Child names are known only after reading; a first pass finds them.
        let decl = facts(&src, &|_| false);
        let names = decl.children.clone();
        let f = facts(&src, &|s| names.iter().any(|n| n == &s[0]));
        let dir = child_dir(&file, is_root);
        for c in &f.children {
            let a = dir.join(format!("{c}.rs"));
            let b = dir.join(c).join("mod.rs");
            let path = if a.exists() {
                a
            } else if b.exists() {
                b
            } else {
                return Err(format!(
                    "{}: `mod {c};`: expected {} or {}",
                    file.display(),
                    a.display(),
                    b.display()
                ));
            };
            let mut m = module.clone();
            m.push(c.clone());
            todo.push((path, m, false));
        }
        places.push(Place {
            file,
            module,
            facts: f,
        });
    }
    places.sort_by(|a, b| a.module.cmp(&b.module));
    Ok(places)
}

/// One crate's findings, as lines to print.
fn check_crate(dir: &Path) -> Result<Vec<String>, String> {
    let src = dir.join("src");
    let mut roots = Vec::new();
    for r in ["lib.rs", "main.rs"] {
        if src.join(r).exists() {
            roots.push((src.join(r), r == "main.rs"));
        }
    }
    if let Ok(rd) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        bins.sort();
        for b in bins {
            if b.extension().is_some_and(|e| e == "rs") {
                roots.push((b, true));
            } else if b.join("main.rs").exists() {
                roots.push((b.join("main.rs"), true));
            }
        }
    }
    let mut found = Vec::new();
    let mut sized = std::collections::BTreeSet::new();
    let show = |p: &Path| p.strip_prefix(dir).unwrap_or(p).display().to_string();
    for (root, binary) in roots {
        let places = tree(&root)?;
        let index: BTreeMap<Vec<String>, usize> = places
            .iter()
            .enumerate()
            .map(|(i, p)| (p.module.clone(), i))
            .collect();
        // Edges: from place to place, with the line and the path that makes them.
        let mut edges: BTreeMap<(usize, usize), (usize, String)> = BTreeMap::new();
        for (from, p) in places.iter().enumerate() {
            if p.facts.non_test_lines > MAX_LINES && sized.insert(p.file.clone()) {
                found.push(format!(
                    "{}: {}: {} non-test lines (at most {MAX_LINES})",
                    dir.display(),
                    show(&p.file),
                    p.facts.non_test_lines
                ));
            }
            for c in &p.facts.children {
                let mut m = p.module.clone();
                m.push(c.clone());
                if let Some(&to) = index.get(&m) {
                    edges.entry((from, to)).or_insert((0, format!("mod {c}")));
                }
            }
            for (segs, around, line) in &p.facts.uses {
                let mut here: Vec<String> = p.module.iter().chain(around.iter()).cloned().collect();
                let mut abs: Vec<String>;
                let mut k = 0;
                match segs[0].as_str() {
                    "crate" => {
                        abs = Vec::new();
                        k = 1;
                    }
                    "self" | "super" => {
                        while k < segs.len() && (segs[k] == "super" || segs[k] == "self") {
                            if segs[k] == "super" && here.pop().is_none() {
                                break;
                            }
                            k += 1;
                        }
                        abs = here.clone();
                    }
                    "::" => continue,
                    first => {
                        // A name: a child module of where it is written, else another crate.
                        let mut m = here.clone();
                        m.push(first.to_string());
                        if !index.contains_key(&m) {
                            continue;
                        }
                        abs = here.clone();
                    }
                }
                abs.extend(segs[k..].iter().cloned());
                // The deepest module of the path that is a file.
                let mut to = None;
                for n in (0..=abs.len()).rev() {
                    if let Some(&t) = index.get(&abs[..n]) {
                        to = Some(t);
                        break;
                    }
                }
                let Some(to) = to else { continue };
                if to == from {
                    continue;
                }
                // An ancestor's items are the module's own (one place), but for a binary's root.
                let target = &places[to].module;
                let ancestor = p.module.len() > target.len() && p.module.starts_with(target);
                if ancestor && !(binary && target.is_empty()) {
                    continue;
                }
                edges.entry((from, to)).or_insert((*line, segs.join("::")));
            }
        }
        // Circles: strongly connected components of more than one place (Tarjan).
        let n = places.len();
        let mut adj = vec![Vec::new(); n];
        for &(a, b) in edges.keys() {
            adj[a].push(b);
        }
        for comp in scc(&adj) {
            if comp.len() < 2 {
                continue;
            }
            let names: Vec<String> = comp.iter().map(|&i| show(&places[i].file)).collect();
            let mut why = Vec::new();
            for (&(a, b), (line, path)) in &edges {
                if comp.contains(&a) && comp.contains(&b) {
                    let at = if *line > 0 {
                        format!(":{line}")
                    } else {
                        String::new()
                    };
                    why.push(format!(
                        "    {}{at} -> {} ({path})",
                        show(&places[a].file),
                        show(&places[b].file)
                    ));
                }
            }
            found.push(format!(
                "{}: import circle between {}:\n{}",
                dir.display(),
                names.join(", "),
                why.join("\n")
            ));
        }
    }
    Ok(found)
}

/// Strongly connected components (Tarjan's algorithm, iterative), each sorted.
fn scc(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = adj.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut out, mut next) = (Vec::new(), Vec::new(), 0);
    for s in 0..n {
        if index[s] != usize::MAX {
            continue;
        }
        let mut work = vec![(s, 0usize)];
        while let Some(&(v, ei)) = work.last() {
            if ei == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            if ei < adj[v].len() {
                let w = adj[v][ei];
                if let Some(top) = work.last_mut() {
                    top.1 += 1;
                }
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = stack.pop().expect("on the stack");
                    on[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                comp.sort();
                out.push(comp);
            }
        }
    }
    out
}

fn main() -> ExitCode {
    let dirs: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if dirs.is_empty() {
        eprintln!("usage: house CRATE_DIR..");
        return ExitCode::from(2);
    }
    let mut bad = 0;
    for d in &dirs {
        match check_crate(d) {
            Ok(found) => {
                for f in &found {
                    println!("{f}");
                }
                bad += found.len();
            }
            Err(e) => {
                eprintln!("house: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if bad > 0 {
        println!("house: {bad} finding(s): import circles between files, or files over {MAX_LINES} non-test lines");
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
