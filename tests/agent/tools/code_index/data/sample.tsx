import React, { useState } from "react";

interface Props {
  label: string;
}

export function Button({ label }: Props) {
  const [count, setCount] = useState(0);
  const handleClick = () => setCount(count + 1);
  return <button onClick={handleClick}>{label} {count}</button>;
}

export const Badge = ({ label }: Props) => <span>{label}</span>;

export default class Panel extends React.Component<Props> {
  render() {
    return <div>{this.props.label}</div>;
  }
}
