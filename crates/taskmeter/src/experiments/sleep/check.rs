//! The rules a point's settings obey before anything runs; every refusal is one clear sentence.

use crate::report::format::format_ns;
use taskmeter_model::run::Settings;
use taskmeter_protocol::Mode;

/// Refuses settings no worker could run, or that would starve the machine.
pub fn check_settings(settings: &Settings) -> Result<(), String> {
    if settings.duration_ns == 0 {
        return Err("--duration must be longer than 0".into());
    }
    if settings.units == 0 {
        return Err("units must be >= 1".into());
    }
    if settings.start_limit_ns == 0 {
        return Err("--start-limit must be longer than 0".into());
    }
    let schedule = settings.sleep.schedule;
    let longest = schedule.max_expected(settings.units);
    if longest > settings.duration_ns {
        return Err(format!(
            "the longest sleep ({}, with --sleep {} and {} units) is longer than --duration ({}): no iteration could be measured",
            format_ns(longest as f64),
            schedule,
            settings.units,
            format_ns(settings.duration_ns as f64)
        ));
    }
    let shortest = schedule.expected(1, 0);
    if settings.sleep.mode == Mode::Absolute && schedule.sleeps() && shortest == 0 {
        return Err("absolute mode needs a sleep longer than 0: a period of 0 never ends".into());
    }
    if settings.sleep.mode == Mode::Absolute && shortest > 0 && shortest < 1_000 {
        return Err("absolute mode needs a period of at least 1us (a shorter one only counts missed periods)".into());
    }
    check_real_time(settings, false)?;
    super::rows::plan_for(settings, "thread").check().map_err(|e| e.to_string())?;
    // Each row as its worker will run it (its recipe, its knob), refused now rather than in
    // every row: a recipe waits in the sleep loop only, and one that spins (by the recipes'
    // naming, its name says `spin`) or a knob's real-time policy meets the real-time check.
    for info in settings.runtimes.iter().filter_map(|id| taskmeter_measure::runtimes::find(id)) {
        let plan =
            taskmeter_protocol::Plan { wait: info.recipe.to_string(), ..super::rows::plan_for(settings, info.base) };
        plan.check().map_err(|e| format!("{}: {e}", info.id))?;
        let sched = info.knob.map_or_else(|| settings.sched.clone(), |knob| knob.applied_to(&settings.sched));
        let row = Settings { sched, ..settings.clone() };
        check_real_time(&row, taskmeter_measure::runtimes::spins(info.recipe))
            .map_err(|e| format!("{}: {e}", info.id))?;
    }
    Ok(())
}

/// A real-time worker that busy-works on every core can starve the machine (RT throttling
/// leaves others 5 % of each second), so it needs an explicit yes.
fn check_real_time(settings: &Settings, wait_spins: bool) -> Result<(), String> {
    let Some(policy) = settings.sched.policy.filter(|p| p.is_real_time()) else { return Ok(()) };
    let online = taskmeter_machine::sched::online_cpus().len();
    let usable = settings.sched.cpus.as_ref().map_or(online, |c| c.len());
    let works = settings.busy.iters > 0 || !settings.sleep.schedule.sleeps() || wait_spins;
    let spins = works && settings.units as usize >= usable && usable >= online;
    if spins && !settings.allow_rt_spin {
        return Err(format!(
            "policy {policy} with busy work (or --sleep none, or a spinning wait) on {} units can keep all {online} cores busy at real-time priority and starve the machine; \
             pin the workers to fewer cores with --cpus, use --busy 0, or pass --allow-rt-spin",
            settings.units
        ));
    }
    Ok(())
}
