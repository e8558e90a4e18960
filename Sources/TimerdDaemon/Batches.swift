import Dispatch
import TimerdSystem

/// Group commit for work handed over one item at a time: items that arrive while a batch is being
/// handled wait and go together in the next, one batch at a time on the queue. Nothing waits to fill a
/// batch (unlike `Gathering`, which spaces its takes): a lone item goes at once, and when items come
/// faster than a batch is handled, each batch carries what arrived meanwhile. `split` picks the next
/// batch from what waits (in order) and leaves the rest for later. Cluster mode claims fires and
/// publishes runs this way (`ClusterNode`), one etcd transaction or write per batch.
final class Batches<Item: Sendable>: Sendable {
    private let queue: DispatchQueue
    private let split: @Sendable ([Item]) -> (batch: [Item], rest: [Item])
    private let handle: @Sendable ([Item]) -> Void
    private let waiting = Locked<(items: [Item], draining: Bool)>(([], false))

    init(label: String, split: @escaping @Sendable ([Item]) -> (batch: [Item], rest: [Item]),
         handle: @escaping @Sendable ([Item]) -> Void) {
        queue = DispatchQueue(label: label)
        self.split = split
        self.handle = handle
    }

    func add(_ item: Item) {
        let start = waiting.withLock { waiting -> Bool in
            waiting.items.append(item)
            guard !waiting.draining else { return false }
            waiting.draining = true
            return true
        }
        if start { queue.async { [self] in drain() } }
    }

    /// On the queue: batches until nothing waits.
    private func drain() {
        while true {
            let batch = waiting.withLock { waiting -> [Item] in
                guard !waiting.items.isEmpty else {
                    waiting.draining = false
                    return []
                }
                let (batch, rest) = split(waiting.items)
                waiting.items = rest
                return batch
            }
            guard !batch.isEmpty else { return }
            handle(batch)
        }
    }
}
