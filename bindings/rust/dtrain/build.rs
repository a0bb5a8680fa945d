//! Lets this crate's tests and examples run without `LD_LIBRARY_PATH`: dtrain-sys publishes
//! libdtrain's directory as `DEP_DTRAIN_RPATH` (unset with `DTRAIN_RPATH=0`, or when the
//! library is on the default search path) and it becomes their rpath. A program using this
//! crate does the same in its own build.rs (see the README).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_DTRAIN_RPATH");
    if let Ok(dir) = std::env::var("DEP_DTRAIN_RPATH") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
