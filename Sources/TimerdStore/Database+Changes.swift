import TimerdCore

extension Database {
    /// Writes `changes` in order (inside the caller's transaction). A run of `deleteJob`s and
    /// `deleteCancelled`s is deleted set-wise, one statement per table for each `deleteChunk` jobs, the
    /// cancels' progress written after: a `CANCEL` of 100,000 jobs was 300,000 statements before, and its
    /// deletions behind the `OK` come 100 jobs each (deletes of different jobs commute, so the order
    /// still holds).
    func apply(_ changes: [StoreChange]) throws(StoreError) {
        var deletes: [String] = []
        var progress: [StoreChange] = []
        for change in changes {
            switch change {
            case .deleteJob(let name):
                deletes.append(name)
                continue
            case .deleteCancelled(let id, let names, let done, let finished):
                deletes += names
                progress.append(.deleteCancelled(id: id, names: [], done: done, finished: finished))
                continue
            default:
                break
            }
            try deleteJobs(deletes, then: progress)
            deletes.removeAll(keepingCapacity: true)
            progress.removeAll()
            try apply(change)
        }
        try deleteJobs(deletes, then: progress)
    }

    private func deleteJobs(_ names: [String], then progress: [StoreChange]) throws(StoreError) {
        try deleteJobs(names)
        for change in progress { try apply(change) }
    }

    /// Jobs deleted by one statement per table; below 999 parameters, SQLite's limit before 3.32.
    static let deleteChunk = 500

    /// `DELETE FROM <table> WHERE <column> IN (?1, …, ?deleteChunk)`.
    private static func deleteChunkStatement(_ table: String, _ column: String) -> String {
        "DELETE FROM \(table) WHERE \(column) IN (" + (1...deleteChunk).map { "?\($0)" }.joined(separator: ", ") + ")"
    }

    private static let deleteRunsChunk = deleteChunkStatement("runs", "job")
    private static let deleteFiresChunk = deleteChunkStatement("fires", "job")
    private static let deleteJobsChunk = deleteChunkStatement("jobs", "name")

    /// Deletes the jobs, their runs and their due fires: a few one by one, many a chunk at a time (the last
    /// chunk padded with its last name, which an `IN` list does not mind).
    func deleteJobs(_ names: [String]) throws(StoreError) {
        guard names.count >= 8 else {
            for name in names { try apply(.deleteJob(name)) }
            return
        }
        for start in stride(from: 0, to: names.count, by: Self.deleteChunk) {
            var values = names[start..<min(start + Self.deleteChunk, names.count)].map { SQLValue.text($0) }
            values += repeatElement(values[values.count - 1], count: Self.deleteChunk - values.count)
            try execute(Self.deleteRunsChunk, values)
            try execute(Self.deleteFiresChunk, values)
            try execute(Self.deleteJobsChunk, values)
        }
    }

    /// Writes one change (inside the caller's transaction).
    func apply(_ change: StoreChange) throws(StoreError) {
        switch change {
        case .putJob(let job):
            try execute(
                """
                INSERT INTO jobs (name, options, paused, runs, added_at, last_scheduled, anchor, owner_uid, shared)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                ON CONFLICT (name) DO UPDATE SET options = excluded.options, paused = excluded.paused,
                    runs = excluded.runs, added_at = excluded.added_at, last_scheduled = excluded.last_scheduled,
                    anchor = excluded.anchor, owner_uid = excluded.owner_uid, shared = excluded.shared
                """,
                [
                    .text(job.name), .text(OptionsCoding.encode(job.options)), .integer(job.paused ? 1 : 0),
                    .integer(Int64(job.runs)), SQLValue(job.addedAt), SQLValue(job.lastScheduled), SQLValue(job.anchor),
                    job.ownerUID.map { .integer(Int64($0)) } ?? .null, .integer(job.shared ? 1 : 0),
                ])
        case .deleteJob(let name):
            try execute("DELETE FROM runs WHERE job = ?1", [.text(name)])
            try execute("DELETE FROM fires WHERE job = ?1", [.text(name)])
            try execute("DELETE FROM jobs WHERE name = ?1", [.text(name)])
        case .setPaused(let name, let paused):
            try execute("UPDATE jobs SET paused = ?2 WHERE name = ?1", [.text(name), .integer(paused ? 1 : 0)])
        case .recordFire(let name, let runs, let lastScheduled):
            try execute(
                "UPDATE jobs SET runs = ?2, last_scheduled = coalesce(?3, last_scheduled) WHERE name = ?1",
                [.text(name), .integer(Int64(runs)), SQLValue(lastScheduled)])
        case .recordRun(let run, let keep):
            try execute(
                """
                INSERT INTO runs (job, run, scheduled_at, started_at, ended_at, result, exit_code, http_status,
                    lateness_ms, output, node, cpu_usage_ms, memory_peak_bytes, io_read_bytes, io_write_bytes, attempt, parameters,
                    reason, signal)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)
                """,
                [
                    .text(run.job), .integer(Int64(run.run)), SQLValue(run.scheduledAt), SQLValue(run.startedAt),
                    SQLValue(run.endedAt), .text(run.result), SQLValue(run.exitCode), SQLValue(run.httpStatus),
                    SQLValue(run.latenessMs), .text(run.output), run.node.map { .text($0) } ?? .null,
                    SQLValue(run.cpuUsageMs), SQLValue(run.memoryPeakBytes), SQLValue(run.ioReadBytes),
                    SQLValue(run.ioWriteBytes), .integer(Int64(run.attempt)), run.parameters.map { .text($0) } ?? .null,
                    run.reason.map { .text($0) } ?? .null, SQLValue(run.signal),
                ])
            // Everything from the (keep+1)-th newest down; nothing when there are no more than `keep`.
            try execute(
                """
                DELETE FROM runs WHERE job = ?1
                    AND id <= (SELECT id FROM runs WHERE job = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)
                """, [.text(run.job), .integer(Int64(max(keep, 0)))])
        case .recordConfigJobFire(let name, nil):
            try execute("DELETE FROM config_job_fires WHERE name = ?1", [.text(name)])
        case .recordConfigJobFire(let name, let lastScheduled?):
            try execute(
                """
                INSERT INTO config_job_fires (name, last_scheduled) VALUES (?1, ?2)
                ON CONFLICT (name) DO UPDATE SET last_scheduled = excluded.last_scheduled
                """, [.text(name), SQLValue(lastScheduled)])
        case .markCancelled(let id, let names):
            try execute("INSERT INTO cancels (id, names) VALUES (?1, ?2)", [.integer(id), .text(names.joined(separator: "\n"))])
            try execute("INSERT INTO cancels_done (id, done) VALUES (?1, 0)", [.integer(id)])
        case .deleteCancelled(let id, let names, let done, let finished):
            try deleteJobs(names)
            if finished {
                try execute("DELETE FROM cancels WHERE id = ?1", [.integer(id)])
                try execute("DELETE FROM cancels_done WHERE id = ?1", [.integer(id)])
            } else {
                try execute("UPDATE cancels_done SET done = ?2 WHERE id = ?1", [.integer(id), .integer(Int64(done))])
            }
        case .recordDueFire(let fire, let keep):
            try execute(
                """
                INSERT OR REPLACE INTO fires (job, seq, scheduled, outcome, run, lateness_ms, result, reason)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                """,
                [
                    .text(fire.job), .integer(Int64(fire.sequence)), SQLValue(fire.scheduled), .text(fire.outcome),
                    SQLValue(fire.run), SQLValue(fire.latenessMs), fire.result.map { .text($0) } ?? .null,
                    fire.reason.map { .text($0) } ?? .null,
                ])
            // A job's records are numbered one after the other: the ones `keep` or more below this one go,
            // a range of the primary key (a fire makes two writes, and this runs at every fire).
            let oldest = Int64(fire.sequence) - Int64(max(keep, 0))
            if oldest >= 1 {
                try execute("DELETE FROM fires WHERE job = ?1 AND seq <= ?2", [.text(fire.job), .integer(oldest)])
            }
        }
    }
}

extension StoreChange {
    /// The kind of change and the job it is about, for messages ("recordRun of backup").
    var summary: String {
        switch self {
        case .putJob(let job): "putJob of \(job.name)"
        case .deleteJob(let name): "deleteJob of \(name)"
        case .setPaused(let name, _): "setPaused of \(name)"
        case .recordFire(let name, _, _): "recordFire of \(name)"
        case .recordRun(let run, _): "recordRun \(run.run) of \(run.job)"
        case .recordConfigJobFire(let name, _): "recordConfigJobFire of \(name)"
        case .recordDueFire(let fire, _): "recordDueFire \(fire.sequence) of \(fire.job)"
        case .markCancelled(let id, let names): "markCancelled \(id) of \(names.count.counted("job"))"
        case .deleteCancelled(let id, let names, _, _): "deleteCancelled \(id) of \(names.count.counted("job"))"
        }
    }
}
