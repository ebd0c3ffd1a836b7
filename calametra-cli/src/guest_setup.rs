//! `calametra guest-setup`: the lockstep QEMU and the guest image, built once into the user's
//! cache (`calametra_qemu::setup`), for guest scenarios and `calametra qemu` in any crate. The
//! scripts are the ones `calametra-qemu` carries; nothing here builds anything itself.

use crate::output::{clean, CliError};
use calametra::env_names::CACHE;
use clap::Args;
use std::path::PathBuf;

/// The options of `calametra guest-setup`.
#[derive(Args, Debug)]
pub(crate) struct GuestSetupArgs {
    /// The cache (default: $CALAMETRA_CACHE, else $XDG_CACHE_HOME/calametra, else
    /// ~/.cache/calametra): where guest scenarios look after their own target directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) cache: Option<PathBuf>,
    /// Do not run install-qemu.sh (QEMU's firmware, the build tools and headers from apt,
    /// which needs root when something is missing): only build.
    #[arg(long)]
    pub(crate) no_install: bool,
    /// Seed the cache from the guest and lockstep QEMU of the same keys in this target
    /// directory (a repository's `target/`, a CI cache) instead of building them.
    #[arg(long, value_name = "TARGET")]
    pub(crate) reuse: Option<PathBuf>,
}

/// `calametra guest-setup [--cache DIR] [--no-install] [--reuse TARGET]`.
pub(crate) fn guest_setup(a: &GuestSetupArgs) -> Result<(), CliError> {
    let cache = match a.cache.clone().or_else(calametra_qemu::setup::user_cache) {
        Some(c) => c,
        None => {
            return Err(CliError(
                format!(
                    "no cache directory: set {CACHE}, XDG_CACHE_HOME or HOME, or give --cache DIR"
                ),
                2,
            ))
        }
    };
    let setup = calametra_qemu::setup::Setup {
        cache: cache.clone(),
        install: !a.no_install,
        reuse: a.reuse.clone(),
    };
    let done = setup.run().map_err(|e| CliError(e, 1))?;
    println!("guest:  {}", done.guest.display());
    println!("qemu:   {}", done.qemu.display());
    println!("cache:  {}", cache.display());
    if a.cache.is_some() && std::env::var_os(CACHE).is_none() {
        println!(
            "guest scenarios find it with {CACHE}={}",
            clean(&cache.display().to_string())
        );
    }
    Ok(())
}
