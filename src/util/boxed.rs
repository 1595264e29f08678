//! Futures boxed in place: the box is allocated first and the future built into it.
//! It never runs or polls anything: it only decides where a future's state lives.
//!
//! An `async fn` that awaits another builds the callee's future on the stack and then moves it
//! into its own state, so a large future is copied once per enclosing `async` level on every
//! call. Boxing the large part once, where it is made, leaves the levels above it a pointer to
//! move. `Box::pin(make())` would still build the future on the stack and copy all of it.

use std::pin::Pin;

/// `make()`'s future in a box allocated before the future is built.
pub fn in_place<F: Future>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    let slot = Box::<F>::new_uninit();
    Box::into_pin(Box::write(slot, make()))
}

#[cfg(test)]
mod tests {
    use super::in_place;

    #[tokio::test]
    async fn a_future_boxed_in_place_keeps_its_state_and_output() {
        // A future larger than the 9 KiB a POST's pipeline is, with state that must arrive
        // intact in the box.
        let mut state = [0u8; 16 * 1024];
        for (i, b) in state.iter_mut().enumerate() {
            *b = (i % 256) as u8;
        }
        let fut = in_place(move || async move {
            tokio::task::yield_now().await;
            state.iter().map(|&b| u64::from(b)).sum::<u64>()
        });
        assert!(std::mem::size_of_val(&*fut) >= 16 * 1024);
        assert_eq!(fut.await, 64 * (0..=255u64).sum::<u64>());
    }
}
