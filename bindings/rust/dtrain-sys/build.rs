//! Finds libdtrain for the linker.
//!
//! 1. `DTRAIN_LIB_DIR` (and optionally `DTRAIN_INCLUDE_DIR`) when set;
//! 2. otherwise `pkg-config --libs-only-L dtrain` (honours `PKG_CONFIG_PATH`);
//! 3. otherwise the linker's default search path, with a warning.
//!
//! Programs then find libdtrain.so at run time without `LD_LIBRARY_PATH`: its directory is
//! published as `DEP_DTRAIN_RPATH` (this crate `links = "dtrain"`) for the build scripts of
//! crates that depend on this one directly, which add it as an rpath to their own binaries
//! and tests (`cargo:rustc-link-arg` reaches only the crate that prints it; the `dtrain`
//! crate and `samples/rust` do this). `DTRAIN_RPATH=0` leaves it out (a package that
//! installs libdtrain on the system search path).
//!
//! The bindings themselves are committed (src/bindings.rs, made by generate.sh), so
//! building needs neither bindgen nor libclang.
use std::env;
use std::process::Command;

fn pkg_config(args: &[&str]) -> Option<String> {
    let pc = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(pc).args(args).arg("dtrain").output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    for var in [
        "DTRAIN_LIB_DIR",
        "DTRAIN_INCLUDE_DIR",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG",
        "DTRAIN_RPATH",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    let mut lib_dirs: Vec<String> = Vec::new();
    let mut include_dir = env::var("DTRAIN_INCLUDE_DIR")
        .ok()
        .filter(|s| !s.is_empty());

    if let Some(dir) = env::var("DTRAIN_LIB_DIR").ok().filter(|s| !s.is_empty()) {
        lib_dirs.push(dir);
    } else if let Some(flags) = pkg_config(&["--libs-only-L"]) {
        lib_dirs.extend(
            flags
                .split_whitespace()
                .filter_map(|f| f.strip_prefix("-L"))
                .map(str::to_string),
        );
        if include_dir.is_none() {
            include_dir = pkg_config(&["--variable=includedir"]).filter(|s| !s.is_empty());
        }
    } else {
        println!(
            "cargo:warning=dtrain-sys: pkg-config found no dtrain and DTRAIN_LIB_DIR is not set; \
             linking -ldtrain from the default search path"
        );
    }

    for dir in &lib_dirs {
        println!("cargo:rustc-link-search=native={dir}");
    }
    println!("cargo:rustc-link-lib=dylib=dtrain");
    // Seen by crates that depend on this one as DEP_DTRAIN_LIB_DIR / DEP_DTRAIN_INCLUDE /
    // DEP_DTRAIN_RPATH.
    if let Some(dir) = lib_dirs.first() {
        println!("cargo:lib_dir={dir}");
        if env::var("DTRAIN_RPATH").map_or(true, |v| v != "0") {
            // pkg-config may answer "<prefix>/lib/pkgconfig/../../lib": store it resolved.
            let rpath = std::fs::canonicalize(dir)
                .map_or_else(|_| dir.clone(), |p| p.to_string_lossy().into_owned());
            println!("cargo:rpath={rpath}");
            println!("cargo:rustc-link-arg=-Wl,-rpath,{rpath}");
        }
    }
    if let Some(dir) = include_dir {
        println!("cargo:include={dir}");
    }
}
