import Dispatch
import Synchronization
import Testing
@testable import TimerdDaemon

/// `Batches`: group commit for items handed over one at a time (cluster claims and run reports).
@Suite struct BatchesTests {
    @Test func aLoneItemGoesAtOnceAndWhatArrivesMeanwhileGoesInTheNextBatchSplitAsAsked() {
        let handled = Mutex<[[Int]]>([])
        let gate = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        // At most 3 an item batch, odd and even numbers never together (as claims of one key never are).
        let batches = Batches<Int>(label: "test.batches", split: { waiting in
            let parity = waiting[0] % 2
            let batch = Array(waiting.filter { $0 % 2 == parity }.prefix(3))
            var rest = waiting
            for item in batch { rest.remove(at: rest.firstIndex(of: item)!) }
            return (batch, rest)
        }) { batch in
            handled.withLock { $0.append(batch) }
            entered.signal()
            if batch == [0] { gate.wait() }  // hold the first batch while more arrive
        }
        batches.add(0)
        #expect(entered.wait(timeout: .now() + 5) == .success, "a lone item is handled without waiting for company")
        #expect(handled.withLock { $0 } == [[0]])
        for item in 1...7 { batches.add(item) }
        gate.signal()
        for _ in 0..<3 { #expect(entered.wait(timeout: .now() + 5) == .success) }
        #expect(handled.withLock { $0 } == [[0], [1, 3, 5], [2, 4, 6], [7]])
    }
}
