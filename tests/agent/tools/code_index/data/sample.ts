export const DEFAULT_PORT = 8080;

export interface Shape {
  name: string;
  area(): number;
}

export type ShapeId = string | number;

enum Color {
  Red,
  Green,
}

export abstract class Base<T> implements Shape {
  name = "base";
  abstract area(): number;

  describe(): string {
    return `${this.name}: ${this.area()}`;
  }
}

export function makeShape(id: ShapeId): Shape | undefined {
  return undefined;
}

export const area = (s: Shape): number => s.area();

namespace Geometry {
  export function origin(): [number, number] { return [0, 0]; }
}

declare function overloaded(x: string): void;
