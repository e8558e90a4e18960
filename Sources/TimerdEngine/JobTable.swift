import TimerdCore

/// The engine's jobs by name, with the counts kept where every job comes and goes (jobs per owner for
/// `user_max_jobs`, `owner=connection` jobs per connection).
///
/// An `EngineJob` is several hundred bytes and a dictionary keeps a third or more of its slots empty, so
/// each job lives in a box of its own and the dictionary holds pointers. The table is owned by one
/// engine: copying it shares the boxes, so an engine is never copied while both copies change.
package struct JobTable: Sequence, Sendable {
    private final class Box: @unchecked Sendable {
        // Touched only by the engine that owns the table (see the type's comment).
        var job: EngineJob?
        init(_ job: EngineJob) { self.job = job }
    }

    private var boxes: [JobName: Box] = [:]
    package private(set) var countByOwner: [UInt32: Int] = [:]
    private var byConnection: [Int: Set<JobName>] = [:]

    package init() {}

    package subscript(name: JobName) -> EngineJob? {
        get { boxes[name]?.job }
        _modify {
            if let box = boxes[name] {
                // Moved out while the caller changes it, so its arrays stay uniquely referenced.
                var job = box.job.take()
                let before = job.map { ($0.ownerUID, $0.ownerConnection) }
                defer {
                    if let job {
                        box.job = job
                        if let before, before != (job.ownerUID, job.ownerConnection) {
                            uncount(name, before.0, before.1)
                            count(job)
                        }
                    } else {
                        boxes[name] = nil
                        if let before { uncount(name, before.0, before.1) }
                    }
                }
                yield &job
            } else {
                var job: EngineJob? = nil
                defer {
                    if let job {
                        boxes[name] = Box(job)
                        count(job)
                    }
                }
                yield &job
            }
        }
    }

    private mutating func count(_ job: EngineJob) {
        countByOwner[job.ownerUID, default: 0] += 1
        if let connection = job.ownerConnection { byConnection[connection, default: []].insert(job.spec.name) }
    }

    private mutating func uncount(_ name: JobName, _ owner: UInt32, _ connection: Int?) {
        countByOwner[owner, default: 1] -= 1
        if countByOwner[owner] == 0 { countByOwner[owner] = nil }
        if let connection {
            byConnection[connection]?.remove(name)
            if byConnection[connection]?.isEmpty == true { byConnection[connection] = nil }
        }
    }

    package var count: Int { boxes.count }
    package var isEmpty: Bool { boxes.isEmpty }
    package var keys: some Collection<JobName> { boxes.keys }
    package var values: some Sequence<EngineJob> { boxes.values.lazy.map { $0.job! } }

    /// The `owner=connection` jobs of a connection, sorted by name.
    package func owned(byConnection connection: Int) -> [JobName] { (byConnection[connection] ?? []).sorted() }

    @discardableResult
    package mutating func removeValue(forKey name: JobName) -> EngineJob? {
        guard let job = boxes.removeValue(forKey: name)?.job else { return nil }
        uncount(name, job.ownerUID, job.ownerConnection)
        return job
    }

    package func makeIterator() -> some IteratorProtocol<(key: JobName, value: EngineJob)> {
        boxes.lazy.map { (key: $0.key, value: $0.value.job!) }.makeIterator()
    }
}
