package dev.vmmkit.engine;

/** Reads one kind of memory's figures; injectable so that the monitor's thresholds are testable. */
@FunctionalInterface
public interface MemoryReader {
    MemoryFigures read();
}
