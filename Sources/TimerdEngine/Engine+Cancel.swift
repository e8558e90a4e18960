import TimerdCore

/// `CANCEL` of more than `cancelSlice` jobs (a tag on 100,000 of them): one request, all or nothing, in
/// steps short enough for the fires of other jobs to go on in between. It is checked a slice per input,
/// each answered `Answer.partlyApplied(change)`, the caller giving `Input.continueChange(change)` for the
/// next; after the last, all its deletions are written ahead at once (`Effect.writeAhead`). Once they are
/// durable (`Input.changeSaved`) none of its jobs fires or is listed any more (its jobs' ids are in
/// `cancelsApplying`), and they leave the table a slice per input; the answer `.done` comes with the last. Any refusal while checking refuses the whole
/// cancel, nothing changed; so does a write that fails.
extension Engine {
    /// Jobs a cancel checks or removes per input: a slice takes well under a millisecond.
    package static let cancelSlice = 500

    /// Whether `job`'s `CANCEL` is on disk and taking effect: the job is gone but for its slice's turn.
    package func isCancelPending(_ job: EngineJob) -> Bool {
        !cancelsApplying.isEmpty && cancelsApplying.values.contains { $0.ids.contains(job.id) }
    }

    mutating func startCancel(_ names: [JobName], by requester: Requester) -> Result<Answer, TimerdError>? {
        let number = nextChangeNumber
        nextChangeNumber += 1
        // Room for every id at once: a set growing as it goes rehashed tens of thousands in one step.
        cancelsChecking[number] = CancelCheck(names: names, requester: requester, ids: Set(minimumCapacity: names.count))
        return continueCancel(number)
    }

    /// The next slice of cancel `number`: checked (and, after the last, written ahead) or removed.
    mutating func continueCancel(_ number: UInt64) -> Result<Answer, TimerdError>? {
        if cancelsChecking[number] != nil { return checkCancelSlice(number) }
        return removeCancelSlice(number)
    }

    private mutating func checkCancelSlice(_ number: UInt64) -> Result<Answer, TimerdError>? {
        guard var check = cancelsChecking.removeValue(forKey: number) else { return .success(.done) }
        let checked = check.slices.count * Self.cancelSlice
        let slice = check.names[checked..<min(checked + Self.cancelSlice, check.names.count)]
        let jobs: [EngineJob]
        do { jobs = try checkCancel(slice, by: check.requester) } catch { return .failure(error) }
        for job in jobs {
            check.ids.insert(job.id)
            if isSavedByRequests(job) { check.records.append(.deleteJob(job.name)) }
        }
        check.slices.append(jobs)
        guard checked + jobs.count == check.names.count else {
            cancelsChecking[number] = check
            return .success(.partlyApplied(number))
        }
        guard !check.records.isEmpty else { return applyCancel(check.slices, ids: check.ids, change: number) }
        cancelsSaving[number] = (check.slices, check.ids)
        awaitingSave[number] = PlannedChange(kind: .cancel([]), records: check.records)
        out.append(.writeAhead(change: number, records: check.records))
        return nil
    }

    /// The cancel's deletions are durable: from now on its jobs are as good as gone.
    mutating func applyCancel(_ slices: [[EngineJob]], ids: Set<UInt64>, change number: UInt64) -> Result<Answer, TimerdError>? {
        cancelsApplying[number] = CancelInProgress(rest: slices.reversed(), ids: ids)
        return removeCancelSlice(number)
    }

    private mutating func removeCancelSlice(_ number: UInt64) -> Result<Answer, TimerdError> {
        guard var progress = cancelsApplying.removeValue(forKey: number) else { return .success(.done) }
        let slice = progress.rest.popLast() ?? []
        // Their deletions are on disk already (written ahead for the whole cancel).
        savedAhead = slice.filter(isSavedByRequests).map { Persist.deleteJob($0.name) }[...]
        defer { savedAhead = [] }
        // A job removed meanwhile (its owner went) is not removed again.
        for job in slice where jobs[job.name] === job && remove(job.name, reason: "cancelled", logged: false) {
            progress.removed.append(job.name)
        }
        guard progress.rest.isEmpty else {
            cancelsApplying[number] = progress
            return .success(.partlyApplied(number))
        }
        if !progress.removed.isEmpty { log(.info, Self.cancelledSummary(progress.removed)) }
        return .success(.done)
    }
}
