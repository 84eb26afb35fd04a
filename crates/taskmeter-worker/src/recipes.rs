//! Wait recipes: the ways a Rust program can wait for a moment, each a short function you can
//! lift into your own code (protocol: "Wait recipes"). The work loop calls them through
//! [`BlockingTimer`] and [`AsyncTimer`], so a recipe is timed exactly as the runtime's own sleep.
//! Every recipe waits until an absolute CLOCK_MONOTONIC deadline in ns; a relative wait is the
//! same recipe with `now + ns`.

use crate::clock::now_ns;
use crate::workload::{AsyncTimer, BlockingTimer};
use std::future::Future;
use std::marker::PhantomData;

/// A recipe as `taskmeter list recipes` shows it.
pub struct Recipe {
    pub name: &'static str,
    pub about: &'static str,
}

/// How long before its deadline [`hybrid_until`] stops sleeping and starts to spin: above this
/// machine's usual wake-up lateness with the default 50 µs timer slack (`taskmeter run`).
pub const HYBRID_MARGIN_NS: u64 = 100_000;

/// The recipes of an OS thread (Rust std and libc).
pub const THREAD_RECIPES: &[Recipe] = &[
    Recipe { name: "nanosleep", about: "std::thread::sleep (nanosleep) for what is left until the deadline" },
    Recipe { name: "timerfd", about: "a timerfd armed at the deadline (TFD_TIMER_ABSTIME), then read(2)" },
    Recipe { name: "spin", about: "reads the clock until the deadline: one core per waiting unit" },
    Recipe {
        name: "hybrid",
        about: "clock_nanosleep to 100 µs before the deadline, then spin (as the spin_sleep crate does)",
    },
];

/// The recipes of a tokio task.
pub const TOKIO_RECIPES: &[Recipe] = &[
    Recipe {
        name: "timerfd",
        about: "a timerfd per wait, awaited through tokio's AsyncFd (epoll): no 1 ms timer wheel",
    },
    Recipe { name: "spin-yield", about: "tokio::task::yield_now until the deadline: one core per executor thread" },
];

/// The recipes of a smol task.
pub const SMOL_RECIPES: &[Recipe] =
    &[Recipe { name: "spin-yield", about: "smol::future::yield_now until the deadline: one core per executor" }];

/// The recipes of a monoio or glommio task: their io_uring rings are private to them (monoio's
/// ops and glommio's reactor are crate-private), so no raw `IORING_OP_TIMEOUT` can be submitted
/// on the ring their thread waits in.
pub const PER_CORE_RECIPES: &[Recipe] =
    &[Recipe { name: "spin-yield", about: "futures-lite yield_now until the deadline: one core per runtime thread" }];

/// The recipes of a compio task.
pub const COMPIO_RECIPES: &[Recipe] = &[
    Recipe {
        name: "uring-timeout",
        about: "one IORING_OP_TIMEOUT (absolute, CLOCK_MONOTONIC) per wait on compio's own ring: no timer heap",
    },
    Recipe { name: "spin-yield", about: "futures-lite yield_now until the deadline: one core per runtime thread" },
];

/// Sleeps with `nanosleep` for what is left until `deadline_ns`: the most common way to wait,
/// and the one that drifts, since the time spent before the call is not counted.
pub fn nanosleep_until(deadline_ns: u64) {
    let left = deadline_ns.saturating_sub(now_ns());
    std::thread::sleep(std::time::Duration::from_nanos(left));
}

/// Arms a timerfd at `deadline_ns` and blocks in `read(2)` until it fires (one timerfd per
/// thread, made on first use and kept).
pub fn timerfd_until(deadline_ns: u64) {
    thread_local! {
        static TIMER: Timerfd = Timerfd::new(0).expect("timerfd_create");
    }
    TIMER.with(|timer| {
        timer.arm(deadline_ns);
        timer.read_blocking();
    });
}

/// Reads the clock until `deadline_ns`: the most precise wait, which keeps a core busy.
pub fn spin_until(deadline_ns: u64) {
    while now_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

/// Sleeps (`clock_nanosleep`, absolute) until [`HYBRID_MARGIN_NS`] before `deadline_ns`, then
/// spins: nearly the precision of a spin for a fraction of its CPU.
pub fn hybrid_until(deadline_ns: u64) {
    if let Some(wake) = deadline_ns.checked_sub(HYBRID_MARGIN_NS).filter(|wake| *wake > now_ns()) {
        crate::clock::sleep_until_ns(wake);
    }
    spin_until(deadline_ns);
}

/// A CLOCK_MONOTONIC timerfd.
pub struct Timerfd(std::os::fd::OwnedFd);

impl Timerfd {
    /// `flags`: 0 for blocking reads, `TFD_NONBLOCK` for an event loop.
    pub fn new(flags: libc::c_int) -> std::io::Result<Timerfd> {
        // SAFETY: plain syscall; a valid fd is owned from here on.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, flags | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a new, valid file descriptor that nothing else owns.
        Ok(Timerfd(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
    }

    /// Fires once at `deadline_ns` (at once if it has passed).
    pub fn arm(&self, deadline_ns: u64) {
        let at = libc::timespec {
            tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
        };
        let spec = libc::itimerspec { it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 }, it_value: at };
        // SAFETY: a valid timerfd and itimerspec. A deadline of 0 would disarm it: never asked.
        unsafe {
            libc::timerfd_settime(self.raw(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut());
        }
    }

    /// Reads the expiry count: true when it had fired (false: not yet, for a non-blocking fd).
    pub fn read(&self) -> bool {
        let mut expirations = 0u64;
        // SAFETY: reads 8 bytes into a u64 we own.
        let n = unsafe { libc::read(self.raw(), (&mut expirations as *mut u64).cast(), 8) };
        n == 8
    }

    fn read_blocking(&self) {
        while !self.read() {}
    }

    pub fn raw(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.0)
    }
}

impl std::os::fd::AsRawFd for Timerfd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.raw()
    }
}

/// Awaits `deadline_ns` on a timerfd registered with tokio's reactor (the advice of tokio#5021
/// for sub-millisecond timers: epoll wakes on the timerfd, past the 1 ms wheel).
pub async fn tokio_timerfd_until(deadline_ns: u64) {
    let timer = Timerfd::new(libc::TFD_NONBLOCK).expect("timerfd_create");
    timer.arm(deadline_ns);
    // SAFETY: the timerfd is owned by the AsyncFd and stays open, the same fd, until it drops.
    let registered = unsafe { tokio::io::unix::AsyncFd::register_with_interest(timer, tokio::io::Interest::READABLE) };
    let fd = registered.map_err(|e| e.to_string()).expect("AsyncFd");
    loop {
        let mut ready = fd.readable().await.expect("a timerfd stays readable");
        if ready.get_inner().read() {
            return;
        }
        ready.clear_ready();
    }
}

/// The blocking recipes as timers of the work loop.
macro_rules! blocking_timer {
    ($name:ident, $until:path) => {
        pub struct $name;
        impl BlockingTimer for $name {
            fn sleep_for(ns: u64) {
                $until(now_ns() + ns)
            }
            fn sleep_until(deadline_ns: u64) {
                $until(deadline_ns)
            }
        }
    };
}
blocking_timer!(Nanosleep, nanosleep_until);
blocking_timer!(TimerfdWait, timerfd_until);
blocking_timer!(Spin, spin_until);
blocking_timer!(Hybrid, hybrid_until);

/// Yields to the runtime `T` until the deadline.
pub struct SpinYield<T>(PhantomData<T>);

impl<T: AsyncTimer> AsyncTimer for SpinYield<T> {
    fn sleep_for(ns: u64) -> impl Future<Output = ()> {
        Self::sleep_until(now_ns() + ns)
    }
    async fn sleep_until(deadline_ns: u64) {
        while now_ns() < deadline_ns {
            T::yield_now().await;
        }
    }
    fn yield_now() -> impl Future<Output = ()> {
        T::yield_now()
    }
}

/// tokio with a timerfd per wait.
pub struct TokioTimerfd;

impl AsyncTimer for TokioTimerfd {
    fn sleep_for(ns: u64) -> impl Future<Output = ()> {
        tokio_timerfd_until(now_ns() + ns)
    }
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()> {
        tokio_timerfd_until(deadline_ns)
    }
    fn yield_now() -> impl Future<Output = ()> {
        tokio::task::yield_now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_blocking_recipe_wakes_at_or_after_its_deadline() {
        for wait in [nanosleep_until, timerfd_until, spin_until, hybrid_until] {
            for ahead_ns in [0, 50_000, 300_000] {
                let deadline = now_ns() + ahead_ns;
                wait(deadline);
                assert!(now_ns() >= deadline);
            }
            wait(now_ns().saturating_sub(1_000_000)); // a deadline passed returns
        }
    }

    #[test]
    fn the_tokio_timerfd_wakes_at_or_after_its_deadline() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
        runtime.block_on(async {
            for ahead_ns in [0, 200_000] {
                let deadline = now_ns() + ahead_ns;
                tokio_timerfd_until(deadline).await;
                assert!(now_ns() >= deadline);
            }
        });
    }

    #[test]
    fn recipe_names_are_protocol_names() {
        for recipe in
            THREAD_RECIPES.iter().chain(TOKIO_RECIPES).chain(SMOL_RECIPES).chain(PER_CORE_RECIPES).chain(COMPIO_RECIPES)
        {
            assert!(taskmeter_protocol::plan::is_recipe_name(recipe.name), "{}", recipe.name);
            assert_ne!(recipe.name, taskmeter_protocol::plan::DEFAULT_WAIT);
        }
    }
}
