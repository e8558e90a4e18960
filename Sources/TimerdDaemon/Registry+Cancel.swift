import TimerdCore
import TimerdEngine

/// `CANCEL tag=T` of many jobs: the tag's jobs are looked for a slice per step of the registry's queue,
/// so that no step is long enough to hold a fire up (`docs/protocol.md`). The cancel itself is one
/// request (`Registry.request`): checked whole, written in one transaction, then taking effect in
/// slices (`Engine.cancelSlice`).
extension Registry {
    /// Jobs looked at per step of the queue when looking for a tag's.
    static let tagSlice = 2_000

    /// The jobs with `tag` that `client` may change (all of them for root, the client's own otherwise: a
    /// user's `CANCEL tag=T` never touches another user's jobs), in no order (sorting 100,000 names is tens of
    /// milliseconds: the caller does it elsewhere). The jobs are taken in one step and looked at a slice
    /// at a time: a job added meanwhile is not among them, one removed meanwhile may be (the cancel's
    /// check then says there is no such job).
    func jobNames(withTag tag: String, changeableBy client: Client) async -> [JobName] {
        let jobs = Array(engine.jobs.values)
        var names: [JobName] = []
        for start in stride(from: 0, to: jobs.count, by: Self.tagSlice) {
            if start > 0 { await Task.yield() }
            let slice = jobs[start..<min(start + Self.tagSlice, jobs.count)]
            names += engine.jobNames(withTag: tag, among: slice) { !engine.isCancelPending($0) && maySeeDetails($0, client) }
        }
        return names
    }
}
