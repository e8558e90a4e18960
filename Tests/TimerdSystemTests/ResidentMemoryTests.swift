import Testing

@testable import TimerdSystem

/// `ResidentMemory` gives free heap pages back; the heap still works after it.
@Suite struct ResidentMemoryTests {
    @Test func trimmedHeapStillAllocates() {
        var blocks = (0..<1_000).map { [UInt8](repeating: UInt8($0 % 256), count: 4_096) }
        blocks.removeAll()
        ResidentMemory.trimMalloc()
        let again = [UInt8](repeating: 7, count: 1 << 20)
        #expect(again.allSatisfy { $0 == 7 })
    }
}
