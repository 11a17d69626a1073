package com.example;

import java.util.List;

public class Sample {
    public static final int MAX_SIZE = 10;
    private int count;

    public Sample(int count) {
        this.count = count;
    }

    @Override
    public String toString() {
        return "Sample";
    }

    interface Listener {
        void onEvent(String name);
    }

    enum Mode { FAST, SLOW; boolean isFast() { return this == FAST; } }

    record Pair(int left, int right) {}
}
