import TimerdCore

/// The engine's jobs by name, with the counts kept where every job comes and goes (jobs per owner for
/// `user_max_jobs`, `owner=connection` jobs per connection, the jobs carrying each tag).
///
/// Jobs are objects (`EngineJob`), so the dictionary holds pointers and its empty slots cost eight bytes
/// each. The table belongs to one engine: a copy shares the jobs, so an engine is never copied while
/// both copies change.
package struct JobTable: Sequence, Sendable {
    private var table: [JobName: EngineJob] = [:]
    package private(set) var countByOwner: [UInt32: Int] = [:]
    private var byConnection: [Int: Set<JobName>] = [:]
    /// The names of the jobs carrying each tag: `CANCEL tag=T` of 100,000 jobs looked at every job's tags
    /// to find them, 85–95 ms (a name in a set here is about 24 bytes per tag of a job).
    private var byTag: [String: Set<JobName>] = [:]
    /// The jobs that follow each job (`after=`): found when a run ends without looking at every job.
    private var byUpstream: [JobName: Set<JobName>] = [:]

    package init() {}

    /// The job (a reference: changing it changes the stored job). Setting a job adds, replaces or (nil)
    /// removes it.
    package subscript(name: JobName) -> EngineJob? {
        get { table[name] }
        set {
            if let old = table[name] {
                if let newValue, newValue === old { return }
                uncount(name, old)
            }
            table[name] = newValue
            if let newValue { count(name, newValue) }
        }
    }

    /// Changes a job's spec in the table (a config job changed by a reload), its tags with it.
    package mutating func setSpec(_ spec: JobSpec, of job: EngineJob) {
        untag(spec.name, job)
        job.spec = spec
        tag(spec.name, job)
    }

    private mutating func count(_ name: JobName, _ job: EngineJob) {
        countByOwner[job.ownerUID, default: 0] += 1
        if let connection = job.ownerConnection { byConnection[connection, default: []].insert(name) }
        tag(name, job)
    }

    private mutating func uncount(_ name: JobName, _ job: EngineJob) {
        countByOwner[job.ownerUID, default: 1] -= 1
        if countByOwner[job.ownerUID] == 0 { countByOwner[job.ownerUID] = nil }
        if let connection = job.ownerConnection {
            byConnection[connection]?.remove(name)
            if byConnection[connection]?.isEmpty == true { byConnection[connection] = nil }
        }
        untag(name, job)
    }

    // The tags are read in the spec's box (`job.spec` copies the whole spec).
    private mutating func tag(_ name: JobName, _ job: EngineJob) {
        for tag in job.specBox.spec.tags { byTag[tag, default: []].insert(name) }
        if let upstream = job.specBox.spec.after { byUpstream[upstream, default: []].insert(name) }
    }

    private mutating func untag(_ name: JobName, _ job: EngineJob) {
        for tag in job.specBox.spec.tags {
            byTag[tag]?.remove(name)
            if byTag[tag]?.isEmpty == true { byTag[tag] = nil }
        }
        if let upstream = job.specBox.spec.after {
            byUpstream[upstream]?.remove(name)
            if byUpstream[upstream]?.isEmpty == true { byUpstream[upstream] = nil }
        }
    }

    /// The jobs that follow `upstream` (`after=`), sorted by name.
    package func followers(of upstream: JobName) -> [JobName] { (byUpstream[upstream] ?? []).sorted() }

    package var count: Int { table.count }
    package var keys: some Collection<JobName> { table.keys }
    package var values: some Collection<EngineJob> { table.values }

    /// The jobs carrying `tag`, in no order (the set is shared until the table next changes its tag).
    package func names(withTag tag: String) -> Set<JobName> { byTag[tag] ?? [] }

    /// The `owner=connection` jobs of a connection, sorted by name.
    package func owned(byConnection connection: Int) -> [JobName] { (byConnection[connection] ?? []).sorted() }

    @discardableResult
    package mutating func removeValue(forKey name: JobName) -> EngineJob? {
        guard let job = table.removeValue(forKey: name) else { return nil }
        uncount(name, job)
        return job
    }

    package func makeIterator() -> Dictionary<JobName, EngineJob>.Iterator {
        table.makeIterator()
    }
}
