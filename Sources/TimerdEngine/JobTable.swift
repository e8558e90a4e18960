import TimerdCore

/// The engine's jobs by name, with the counts kept where every job comes and goes (jobs per owner for
/// `user_max_jobs`, `owner=connection` jobs per connection).
///
/// Jobs are objects (`EngineJob`), so the dictionary holds pointers and its empty slots cost eight bytes
/// each. The table belongs to one engine: a copy shares the jobs, so an engine is never copied while
/// both copies change.
package struct JobTable: Sequence, Sendable {
    private var table: [JobName: EngineJob] = [:]
    package private(set) var countByOwner: [UInt32: Int] = [:]
    private var byConnection: [Int: Set<JobName>] = [:]

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
            if let newValue { count(newValue) }
        }
    }

    private mutating func count(_ job: EngineJob) {
        countByOwner[job.ownerUID, default: 0] += 1
        if let connection = job.ownerConnection { byConnection[connection, default: []].insert(job.spec.name) }
    }

    private mutating func uncount(_ name: JobName, _ job: EngineJob) {
        countByOwner[job.ownerUID, default: 1] -= 1
        if countByOwner[job.ownerUID] == 0 { countByOwner[job.ownerUID] = nil }
        if let connection = job.ownerConnection {
            byConnection[connection]?.remove(name)
            if byConnection[connection]?.isEmpty == true { byConnection[connection] = nil }
        }
    }

    package var count: Int { table.count }
    package var keys: some Collection<JobName> { table.keys }
    package var values: some Collection<EngineJob> { table.values }

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
