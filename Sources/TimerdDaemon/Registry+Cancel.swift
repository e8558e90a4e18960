import TimerdCore
import TimerdEngine

/// `CANCEL tag=T` of many jobs: the tag's jobs are taken from the table's index of tags in one step of
/// the registry's queue (`JobTable.names(withTag:)`, a set shared, not copied); those a client may not
/// change are left out a slice per step, so that no step is long enough to hold a fire up
/// (`docs/protocol.md`). The cancel itself is one request (`Registry.request`): checked whole, written
/// in one transaction, then taking effect in slices (`Engine.cancelSlice`).
extension Registry {
    /// Jobs looked at per step of the queue when leaving out those a client may not change.
    static let tagSlice = 2_000

    /// The jobs with `tag` that `client` may change (all of them for root, the client's own otherwise: a
    /// user's `CANCEL tag=T` never touches another user's jobs), in no order (sorting 100,000 names is tens of
    /// milliseconds: the caller does it elsewhere). The jobs are taken in one step and, unless all of them
    /// are the client's, looked at a slice at a time: a job added meanwhile is not among them, one removed
    /// meanwhile may be (the cancel's check then says there is no such job).
    func jobNames(withTag tag: String, changeableBy client: Client) async -> Set<JobName> {
        let tagged = engine.jobs.names(withTag: tag)
        // Root, and no cancel taking effect whose jobs are still in the table: every one of them.
        if client.isAdmin && engine.cancelPendingCount == 0 { return tagged }
        var names = Set<JobName>()
        var rest = tagged.makeIterator()
        var more = true
        while more {
            for _ in 0..<Self.tagSlice {
                guard let name = rest.next() else {
                    more = false
                    break
                }
                if let job = engine.job(name), !engine.isCancelPending(job), maySeeDetails(job, client) { names.insert(name) }
            }
            if more { await Task.yield() }
        }
        return names
    }
}
