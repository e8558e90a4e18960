import TimerdCore

/// `max_output_memory`: the last run's output of every job is held for `show`, up to a daemon-wide total.
/// Beyond it the oldest held outputs are dropped from memory (the history in the state store keeps its
/// copy), so many jobs with chatty commands cannot grow timerd without bound.
///
/// `JobTable.outputBytes` is the exact total; `heldOutputs` lists outputs oldest first by sequence
/// number, with stale entries (a job's output since replaced, or the job gone) skipped and compacted.
extension Registry {
    /// What `show` says instead of an output dropped for the limit.
    static let droppedOutput = "[output no longer held in memory: max_output_memory was reached; see timerctl history]"

    /// Call after setting a job's `lastOutcome`: records it and drops the oldest outputs while over the limit.
    func noteOutputHeld(_ name: JobName) {
        guard var job = jobs[name] else { return }
        job.outputDropped = false
        guard let output = job.lastOutcome?.outcome.output, !output.isEmpty else {
            jobs[name] = job
            return
        }
        nextOutputSequence += 1
        job.outputSequence = nextOutputSequence
        jobs[name] = job
        heldOutputs.append((nextOutputSequence, name))
        let limit = access.settings.maxOutputMemory
        while jobs.outputBytes > limit, heldOutputStart < heldOutputs.count {
            let (sequence, oldest) = heldOutputs[heldOutputStart]
            heldOutputStart += 1
            guard var held = jobs[oldest], held.outputSequence == sequence, var last = held.lastOutcome else { continue }
            last.outcome.output = ""
            held.lastOutcome = last
            held.outputSequence = 0
            held.outputDropped = true
            jobs[oldest] = held
            outputsDropped += 1
            if outputsDropped.isLogMilestone {
                log.warning("max_output_memory (\(limit) bytes) reached: dropped the held output of \(oldest) and \(outputsDropped - 1) earlier (the history keeps them)")
            }
        }
        // Stale entries pile up as jobs run again; compact once they outnumber the jobs.
        if heldOutputs.count - heldOutputStart > 2 * jobs.count + 1_024 || heldOutputStart > heldOutputs.count / 2 {
            heldOutputs = heldOutputs[heldOutputStart...].filter { jobs[$0.name]?.outputSequence == $0.sequence }
            heldOutputStart = 0
        }
    }
}
