package dev.vmmkit.tools.run;

import dev.vmmkit.driver.LibC;
import sun.misc.Signal;
import sun.misc.SignalHandler;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Makes {@code vmmkit run} behave like {@code env} or {@code timeout}: SIGINT, SIGTERM and SIGHUP sent
 * to the launcher go to the program, and the launcher keeps waiting for it instead of dying and
 * leaving it orphaned. The launcher then exits with the program's own status (128 + the signal when
 * the signal ended it).
 *
 * <p>A Ctrl-C or a hang-up of the terminal already reaches every process of the terminal's
 * foreground group, the program included. When the launcher is in that group, SIGINT and SIGHUP are
 * therefore not sent a second time (a program that exits on its second Ctrl-C would otherwise skip
 * its clean-up); SIGTERM always is. A signal ignored when the launcher starts (as {@code nohup}
 * ignores SIGHUP) stays ignored by the launcher and, inherited, by the program.
 */
public final class SignalForwarding implements AutoCloseable {
    private static final String[] FORWARDED = {"INT", "TERM", "HUP"};

    private final Map<Signal, SignalHandler> previous = new LinkedHashMap<>();
    private long pid;
    /** A signal that came before the program started; 0 when none. */
    private int pending;

    private SignalForwarding() {
    }

    /**
     * Takes over SIGINT, SIGTERM and SIGHUP before the program starts, so that none can end the
     * launcher between the start and {@link #forwardTo}; until then a signal is kept for later.
     */
    public static SignalForwarding install() {
        SignalForwarding forwarding = new SignalForwarding();
        long ignored = ignoredSignals();
        for (String name : FORWARDED) {
            Signal signal = new Signal(name);
            // Ignored when the launcher started (nohup): the program inherits that, and the launcher
            // keeps ignoring it too, as a shell does with signals ignored on entry.
            if (isIgnored(ignored, signal.getNumber())) continue;
            forwarding.previous.put(signal, Signal.handle(signal, forwarding::received));
        }
        return forwarding;
    }

    /** The signals this process ignores (the SigIgn mask of /proc/self/status); 0 when unknown. */
    static long ignoredSignals() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("SigIgn:")) return Long.parseUnsignedLong(line.substring(7).trim(), 16);
            }
        } catch (IOException | RuntimeException e) {
            // unknown: forward every signal
        }
        return 0;
    }

    static boolean isIgnored(long mask, int signalNumber) {
        return (mask & (1L << (signalNumber - 1))) != 0;
    }

    /** From now on signals go to process {@code programPid}; one that came earlier is sent now. */
    public synchronized void forwardTo(long programPid) {
        pid = programPid;
        if (pending != 0) send(pid, pending);
    }

    /** The signal that came before {@link #forwardTo}, or 0. */
    public synchronized int pending() {
        return pending;
    }

    private synchronized void received(Signal signal) {
        if (pid == 0) {
            pending = signal.getNumber();
            return;
        }
        boolean fromTerminal = !signal.getName().equals("TERM") && inTerminalForegroundGroup();
        if (!fromTerminal) send(pid, signal.getNumber());
    }

    /**
     * Sends signal {@code number} to {@code pid} with kill(2) (the JDK can send only SIGTERM and
     * SIGKILL); false when the process is gone.
     */
    static boolean send(long pid, int number) {
        return LibC.kill((int) pid, number) == 0;
    }

    /**
     * True when this process belongs to its terminal's foreground process group: fields 5 (pgrp)
     * and 8 (tpgid) of /proc/self/stat, counted after the command name, which may hold spaces.
     */
    static boolean inTerminalForegroundGroup() {
        try {
            String stat = Files.readString(Path.of("/proc/self/stat"));
            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
            long processGroup = Long.parseLong(fields[2]);
            long terminalGroup = Long.parseLong(fields[5]);
            return terminalGroup > 0 && terminalGroup == processGroup;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    /** Gives the signals back to their previous handlers (the JVM's: exit). */
    @Override
    public void close() {
        previous.forEach(Signal::handle);
    }
}
