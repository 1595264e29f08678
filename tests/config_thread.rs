//! The configuration thread (`ops::reload::on_config_thread`): every load and reload compiles
//! on one long-lived thread, and a compile that panics is reported (never a hang), and the
//! thread survives it.

use portico::ops::reload::on_config_thread;

#[test]
fn configurations_compile_on_one_long_lived_thread_and_a_panic_is_reported() {
    let here = std::thread::current().id();
    let first = on_config_thread(|| std::thread::current().id()).expect("ran");
    let second = on_config_thread(|| std::thread::current().id()).expect("ran");
    assert_eq!(first, second, "one thread for every job");
    assert_ne!(first, here, "not the caller's thread");
    let name = on_config_thread(|| std::thread::current().name().map(str::to_owned));
    assert_eq!(name.flatten().as_deref(), Some("portico-config"));

    // A job that panics answers `None`, and the thread lives on for the next job.
    let panicked: Option<u8> = on_config_thread(|| panic!("a compiler bug"));
    assert_eq!(panicked, None);
    assert_eq!(on_config_thread(|| 7), Some(7));
    let after = on_config_thread(|| std::thread::current().id()).expect("ran");
    assert_eq!(after, first, "the same thread after the panic");
}
