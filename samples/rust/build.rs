//! Runs without LD_LIBRARY_PATH: dtrain-sys (a direct dependency for this reason) tells its
//! dependents' build scripts where libdtrain is, and that directory becomes the rpath.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_DTRAIN_RPATH");
    if let Ok(dir) = std::env::var("DEP_DTRAIN_RPATH") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
